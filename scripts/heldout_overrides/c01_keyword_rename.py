class Sampler:
    def sample(self, logits, temperature):
        return logits, temperature

    def step(self, logits):
        return self.sample(logits, temperature=1.0)


class GreedySampler(Sampler):
    def sample(self, logits, temp):  # drift
        return logits, temp
