import inspect


class Base:
    def hook(self, enable=True, fn=None):
        return enable, fn

    def setup(self):
        if "value" in inspect.signature(self.hook).parameters:
            return self.hook(value=True)
        return self.hook(enable=True, fn=None)


class Legacy(Base):
    def hook(self, module, value=False):  # drift
        return module, value
