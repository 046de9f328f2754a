class Root:
    def fetch(self, key):
        return key


class Cached(Root):
    def lookup(self):
        return self.fetch(key="a")


class RenamedFetch(Root):
    def fetch(self, name):  # drift
        return name


class Store(RenamedFetch, Cached):
    pass
