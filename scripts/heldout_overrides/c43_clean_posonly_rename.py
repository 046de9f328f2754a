class Base:
    def get(self, key, /):
        return key


class Sub(Base):
    def get(self, name, /):
        return name
