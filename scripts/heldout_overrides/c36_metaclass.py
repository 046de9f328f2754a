from abc import ABCMeta


class Plugin(metaclass=ABCMeta):
    def activate(self, registry, name):
        return registry, name


class EchoPlugin(Plugin, metaclass=ABCMeta):
    def activate(self, registry):  # drift
        return registry
