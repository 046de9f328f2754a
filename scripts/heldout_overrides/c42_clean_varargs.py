class Base:
    def run(self, x, *, flag=False):
        return x, flag


class Sub(Base):
    def run(self, *args, **kwargs):
        return args, kwargs
