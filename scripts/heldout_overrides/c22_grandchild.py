class Base:
    def run(self, inputs, timeout):
        return inputs, timeout


class Middle(Base):
    def helper(self):
        return None


class Leaf(Middle):
    def run(self, inputs):  # drift
        return inputs
