class Cache:
    def evict(self, *, num_blocks):
        return num_blocks


class LRUCache(Cache):
    def evict(self, *, count):  # drift
        return count
