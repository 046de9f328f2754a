class Vec:
    def __add__(self, other):
        return self


class Vec3(Vec):
    def __add__(self, rhs):
        return self
