class Base:
    def configure(self, *, block_size):
        return block_size


class Sub(Base):
    def configure(self, *, size=16, **kwargs):
        return size, kwargs
