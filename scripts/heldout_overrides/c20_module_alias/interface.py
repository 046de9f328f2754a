class Platform:
    def device_count(self, visible_only=True):
        return visible_only
