class Base:
    def __helper(self, a):
        return a


class Sub(Base):
    def __helper(self):
        return None
