import functools


def traced(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


class Runner:
    def execute(self, model_input, intermediate_tensors):
        return model_input, intermediate_tensors


class TracedRunner(Runner):
    @traced
    def execute(self, model_input):  # drift
        return model_input
