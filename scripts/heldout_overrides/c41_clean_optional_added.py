class Base:
    def run(self, x):
        return x


class Sub(Base):
    def run(self, x, y=None):
        return x, y
