class Writer:
    def write(self, key, value, ttl):
        return key, value, ttl


class FastWriter(Writer):
    def write(self, key, ttl):  # drift
        return key, ttl
