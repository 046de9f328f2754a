class memoized:
    def __init__(self, fget):
        self.fget = fget

    def __get__(self, obj, cls):
        if obj is None:
            return self
        value = obj.__dict__[self.fget.__name__] = self.fget(obj)
        return value


class Base:
    @property
    def size(self):
        return 1


class Sub(Base):
    @memoized
    def size(self):
        return 2
