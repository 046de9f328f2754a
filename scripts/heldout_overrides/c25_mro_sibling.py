class Stepper:
    def advance(self, steps, *, reason=None):
        return steps, reason

    def tick(self):
        return self.advance(1, reason="tick")


class Counter:
    def advance(self, amount):
        return amount


class TickingCounter(Counter, Stepper):  # drift
    pass
