def _reset(self, hard):
    return hard


class Component:
    reset = _reset


class Widget(Component):
    def reset(self):  # drift
        return None
