class Pool:
    def acquire(self, *, timeout=None):
        return timeout


class BlockingPool(Pool):
    def acquire(self, *, timeout):  # drift
        return timeout
