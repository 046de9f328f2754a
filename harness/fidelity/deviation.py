"""Named deviations: changes in vLLM since 0.9.0 that the reference does not follow.

The reference follows vLLM 0.9.0. Against a later tree a differential follows what only moved or
was renamed, and agrees; where vLLM changed what it computes, the difference is a
:class:`Deviation`: a name, what changed, where the tree shows it (found by structure, never by
version string), and the parts of the compared outcome it explains. A difference that no deviation
explains is a disagreement, as always.

A deviation found in a tree is *known* only when ``docs/fidelity.md`` lists it for that tree's
version (:data:`LISTED`, kept equal to the document by a test); one found but not listed fails the
run like a disagreement, naming the change and its file:line so that it can be reviewed.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from harness.fidelity.outcome import first_difference
from harness.vllm_tree.tree import Location, VllmTree

LISTED: Mapping[str, frozenset[str]] = {
    "0.9.0": frozenset(),
    "0.34.0": frozenset(
        {
            "kv-cache-specs/type-id-removed",
            "kv-cache-specs/merge-by-fields",
            "kv-cache-specs/head-size-v",
            "kv-cache-specs/sliding-window-in-flight-tokens",
            "kv-cache-config/planned-for-all-workers",
            "determine-available-memory/sized-by-memory-profiling",
            "block-table-row-ops/row-tables-replaced",
            "runner-inputs/prepare-inputs-replaced",
            "flash-attn-metadata/block-size-check-moved",
            "flash-attn-metadata/cascade-removed",
            "flash-attn-metadata/dcp-fields",
            "flash-attn-metadata/block-table-width",
            "flash-attn-metadata/slot-mapping-by-runner",
            "flashinfer-metadata/reorder-by-runner",
            "flashinfer-metadata/head-size-check-moved",
            "flashinfer-metadata/window-check",
            "flashinfer-metadata/plan-arguments",
            "flashinfer-metadata/metadata-fields",
            "flashinfer-metadata/cascade-removed",
            "flashinfer-metadata/slot-mapping-by-runner",
            "cascade/cascade-removed",
            "mla-split/reorder-by-runner",
            "mla-split/mla-head-sizes",
            "mla-split/mla-metadata-fields",
            "mla-split/mla-chunked-context",
            "mla-split/block-table-width",
            "mla-split/slot-mapping-by-runner",
        }
    ),
}
"""``differential/deviation`` names that docs/fidelity.md lists, by vLLM version."""

ABSENT = "<absent>"
"""What a side shows at a path it does not have."""


def any_difference(vllm: Any, reference: Any) -> bool:
    """Every difference at the deviation's paths is the deviation."""
    del vllm, reference
    return True


@dataclass(frozen=True)
class Deviation:
    """A change in vLLM that the reference does not follow, and how to recognise it."""

    name: str
    change: str
    """What vLLM changed, completing "vLLM 0.34.0 ...", e.g. "removed ``KVCacheSpec.type_id``"."""
    locate: Callable[[VllmTree], Location | None]
    """Where a tree shows the change (None: this tree does not have it)."""
    paths: tuple[str, ...] | None = ()
    """Where its differences show in the compared outcome: dotted keys, ``*`` for any key or
    list index (``specs.*.type_id``). None: nothing is left to compare, the differential does
    not run."""
    explains: Callable[[Any, Any], bool] = any_difference
    """Whether a difference at one of :attr:`paths` (vLLM's part, the reference's) is this
    change; one it does not explain stays a disagreement."""


@dataclass(frozen=True)
class FoundDeviation:
    """A deviation a tree has, where, and whether docs/fidelity.md lists it for its version."""

    differential: str
    deviation: Deviation
    location: Location
    version: str | None

    @property
    def key(self) -> str:
        return f"{self.differential}/{self.deviation.name}"

    @property
    def listed(self) -> bool:
        return self.version is not None and self.key in LISTED.get(self.version, frozenset())

    def describe(self) -> str:
        """``vLLM 0.34.0 <change> in <file>:<line> [<name>]``."""
        return f"vLLM {self.version} {self.deviation.change} in {self.location} [{self.key}]"


def find_deviations(
    tree: VllmTree, differential: str, deviations: Sequence[Deviation]
) -> list[FoundDeviation]:
    """The ``deviations`` of one differential that ``tree`` shows."""
    found: list[FoundDeviation] = []
    for deviation in deviations:
        location = deviation.locate(tree)
        if location is not None:
            found.append(FoundDeviation(differential, deviation, location, tree.version))
    return found


def set_aside(
    vllm: Any, reference: Any, deviations: Sequence[Deviation]
) -> tuple[Any, Any, set[str]]:
    """Both normalised outcomes without the differences ``deviations`` explain, and the names
    of the deviations that explained one. A difference a deviation does not explain stays."""
    vllm, reference = copy.deepcopy(vllm), copy.deepcopy(reference)
    shown: set[str] = set()
    for deviation in deviations:
        for path in deviation.paths or ():
            for v_parent, r_parent, key in _matches(vllm, reference, path.split(".")):
                theirs, ours = _get(v_parent, key), _get(r_parent, key)
                if first_difference(theirs, ours) is None:
                    continue
                if deviation.explains(theirs, ours):
                    shown.add(deviation.name)
                    _drop(v_parent, key)
                    _drop(r_parent, key)
    return vllm, reference, shown


def _get(parent: Any, key: str) -> Any:
    return cast("dict[str, Any]", parent).get(key, ABSENT) if isinstance(parent, dict) else ABSENT


def _drop(parent: Any, key: str) -> None:
    if isinstance(parent, dict):
        cast("dict[str, Any]", parent).pop(key, None)


def _children(v: Any, r: Any) -> list[tuple[Any, Any]]:
    if isinstance(v, dict) and isinstance(r, dict):
        v_map, r_map = cast("dict[str, Any]", v), cast("dict[str, Any]", r)
        keys = [k for k in v_map if k in r_map]
        return [(v_map[k], r_map[k]) for k in keys]
    if isinstance(v, list) and isinstance(r, list):
        v_list, r_list = cast("list[Any]", cast(object, v)), cast("list[Any]", cast(object, r))
        return list(zip(v_list, r_list, strict=False))
    return []


def _matches(v: Any, r: Any, parts: list[str]) -> list[tuple[Any, Any, str]]:
    """``(vLLM parent, reference parent, last key)`` for every place ``parts`` names in both."""
    if len(parts) == 1:
        return [(v, r, parts[0])] if isinstance(v, dict) or isinstance(r, dict) else []
    head, rest = parts[0], parts[1:]
    if head == "*":
        pairs = _children(v, r)
    elif isinstance(v, dict) and isinstance(r, dict):
        v_map, r_map = cast("dict[str, Any]", v), cast("dict[str, Any]", r)
        pairs = [(v_map[head], r_map[head])] if head in v_map and head in r_map else []
    else:
        pairs = []
    return [m for cv, cr in pairs for m in _matches(cv, cr, rest)]
