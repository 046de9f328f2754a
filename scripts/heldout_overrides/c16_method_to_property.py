class Layer:
    def num_params(self):
        return 0


class Linear(Layer):
    @property
    def num_params(self):  # drift
        return 4
