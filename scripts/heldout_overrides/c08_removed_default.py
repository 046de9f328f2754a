class Reader:
    def read(self, size=-1):
        return size


class StrictReader(Reader):
    def read(self, size):  # drift
        return size
