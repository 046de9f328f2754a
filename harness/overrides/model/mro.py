"""The MRO and ancestry index: every class's C3 MRO, and "is ``c`` in ``x``'s MRO" in constant time
on single-base chains (numbered depth first). A class on a cycle or without a consistent order has
itself as MRO and is reported (:attr:`MroIndex.problems`).
"""

from __future__ import annotations

from collections.abc import Iterator

from harness.overrides.model.tree import ClassInfo, InheritanceCycle, MroProblem, NoLinearization


class MroIndex:
    """The MRO of every class given, computed once, and constant-time ancestry tests."""

    def __init__(self, classes: list[ClassInfo]) -> None:
        self._single_base: dict[int, ClassInfo] = {}
        """A class with one usable base -> that base (its MRO is the class, then the base's)."""
        self._stored_mro: dict[int, tuple[ClassInfo, ...]] = {}
        """A class with several usable bases -> its whole C3 MRO."""
        self._broken: set[int] = set()
        """Classes whose MRO could not be computed (see :attr:`problems`)."""
        self.problems: list[MroProblem] = []
        self._compute_mros(classes)
        self._chain_entry: dict[int, int] = {}
        """A class -> when the depth-first numbering of single-base chains entered it."""
        self._chain_exit: dict[int, int] = {}
        """A class -> when that numbering left it (its chain descendants lie in between)."""
        self._chain_end: dict[int, ClassInfo] = {}
        """A class -> the class its single-base chain ends at (no base, or several)."""
        self._label_chains(classes)

    def mro(self, cls: ClassInfo) -> list[ClassInfo]:
        """C3 linearisation over resolvable bases; ``[cls]`` alone if it is broken."""
        return list(self.walk(cls))

    def walk(self, cls: ClassInfo) -> Iterator[ClassInfo]:
        """The MRO, lazily: single-base classes are followed up their chain (no per-class
        copy of a long chain is ever stored), several-base classes hold their whole MRO."""
        while True:
            full = self._stored_mro.get(id(cls))
            if full is not None:
                yield from full
                return
            yield cls
            up = self._single_base.get(id(cls))
            if up is None:
                return
            cls = up

    def _compute_mros(self, classes: list[ClassInfo]) -> None:
        """Post-order over the base graph (iterative), detecting cycles on the way."""
        state: dict[int, int] = {}  # 1 = on stack, 2 = done
        for start in classes:
            if id(start) in state:
                continue
            stack: list[tuple[ClassInfo, Iterator[ClassInfo]]] = [(start, iter(start.bases))]
            state[id(start)] = 1
            while stack:
                cls, bases = stack[-1]
                nxt = next(bases, None)
                if nxt is None:
                    stack.pop()
                    state[id(cls)] = 2
                    self._linearize(cls)
                    continue
                mark = state.get(id(nxt))
                if mark == 1:
                    cycle = [c for c, _ in stack]
                    cycle = [*cycle[cycle.index(nxt) :], nxt]
                    for member in set(cycle):
                        self._report(InheritanceCycle(member, tuple(cycle)))
                    continue
                if mark is None:
                    state[id(nxt)] = 1
                    stack.append((nxt, iter(nxt.bases)))

    def _report(self, problem: MroProblem) -> None:
        if id(problem.cls) not in self._broken:
            self._broken.add(id(problem.cls))
            self.problems.append(problem)

    def _linearize(self, cls: ClassInfo) -> None:
        if id(cls) in self._broken:
            return
        bases = [b for b in cls.bases if id(b) not in self._broken]
        if len(bases) == 1:
            self._single_base[id(cls)] = bases[0]  # C3 of one base is that base's MRO
        elif bases:
            merged = _c3([*(self.mro(b) for b in bases), bases])
            if merged is None:
                self._report(NoLinearization(cls, tuple(bases)))
            else:
                self._stored_mro[id(cls)] = (cls, *merged)

    def _label_chains(self, classes: list[ClassInfo]) -> None:
        """Number the single-base chains depth first, so that "is ``c`` on ``x``'s chain" is two
        comparisons."""
        below: dict[int, list[ClassInfo]] = {}
        for cls in classes:
            up = self._single_base.get(id(cls))
            if up is not None:
                below.setdefault(id(up), []).append(cls)
        clock = 0
        for root in classes:
            if id(root) in self._single_base:
                continue
            stack: list[tuple[ClassInfo, bool]] = [(root, False)]
            while stack:
                cls, leaving = stack.pop()
                if leaving:
                    self._chain_exit[id(cls)] = clock
                    continue
                self._chain_entry[id(cls)] = clock
                self._chain_end[id(cls)] = root
                clock += 1
                stack.append((cls, True))
                stack.extend((child, False) for child in below.get(id(cls), ()))

    def in_mro(self, candidate: ClassInfo, cls: ClassInfo) -> bool:
        """Whether ``candidate`` is in ``cls``'s MRO (``cls`` itself included): O(1) on
        single-base chains, a scan of the stored MRO where several bases meet."""
        if candidate is cls:
            return True
        tin = self._chain_entry.get(id(cls))
        low = self._chain_entry.get(id(candidate))
        if tin is None or low is None:
            return False
        if low <= tin < self._chain_exit[id(candidate)]:
            return True  # on the single-base chain from cls up to its end
        full = self._stored_mro.get(id(self._chain_end[id(cls)]))
        return full is not None and candidate in full  # identity scan of a stored tuple


def _c3(sequences: list[list[ClassInfo]]) -> list[ClassInfo] | None:
    """C3 merge in time linear in the sequences' total length (tail counts kept as heads advance);
    ``None`` if no order exists."""
    tails: dict[int, int] = {}
    for seq in sequences:
        for cls in seq[1:]:
            tails[id(cls)] = tails.get(id(cls), 0) + 1
    heads = [0] * len(sequences)
    out: list[ClassInfo] = []
    while True:
        head: ClassInfo | None = None
        exhausted = True
        for seq, at in zip(sequences, heads, strict=True):
            if at < len(seq):
                exhausted = False
                if not tails.get(id(seq[at])):
                    head = seq[at]
                    break
        if head is None:
            return out if exhausted else None
        out.append(head)
        for i, seq in enumerate(sequences):
            at = heads[i]
            if at < len(seq) and seq[at] is head:
                heads[i] = at = at + 1
                if at < len(seq):
                    tails[id(seq[at])] -= 1
