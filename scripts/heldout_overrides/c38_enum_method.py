import enum


class Color(enum.Enum):
    RED = 1

    def describe(self, verbose):
        return verbose


class Base:
    def describe(self, verbose):
        return verbose


class Shade(Base):
    def describe(self, verbose, extra):  # drift
        return verbose, extra
