class Loader:
    def load(self, path):
        return path


class ShardedLoader(Loader):
    def load(self, path, shard):  # drift
        return path, shard
