class Base:
    def on_done(self, _result):
        return None


class Sub(Base):
    def on_done(self, result):
        return result
