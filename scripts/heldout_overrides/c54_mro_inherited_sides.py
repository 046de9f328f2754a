class Scheduler:
    def step(self, batch_size):
        return batch_size

    def tick(self):
        return self.step(batch_size=1)


class Chunked(Scheduler):
    pass


class StepMixin:
    def step(self, tokens):
        return tokens


class LegacyStep(StepMixin):
    pass


class Mixed(LegacyStep, Chunked):  # drift
    pass
