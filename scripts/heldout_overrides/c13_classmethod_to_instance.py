class Config:
    @classmethod
    def from_dict(cls, data):
        return cls()


class ModelConfig(Config):
    def from_dict(self, data):  # drift
        return self
