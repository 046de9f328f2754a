class Device:
    @property
    def name(self):
        return "cpu"


class GPU(Device):
    def name(self):  # drift
        return "cuda"
