"""The regression catalog: real bugs vLLM shipped in this layer, re-created as variants of the
reference, each with checks that must fail on the buggy variant and pass on the fixed one.

Public API (importing this package imports no torch; entries load on first lookup)::

    from harness.regressions import Regression, Variant, Check, register_regression

    register_regression(Regression(id="my-bug", ..., buggy=Variant(MyBuggyBackend),
                                   fixed=Variant(MyFixedBackend), checks=(...)))

Installed packages add entries through the ``harness.regressions`` entry-point group. From the
shell: ``harness regressions list | show ID | verify [ID...] [--json]``; ``--regression
MODULE:ATTR`` takes an entry or an attention backend from the user's own code. Layering: this
package sits above :mod:`harness.memory` and :mod:`harness.overrides`, which never import it.
"""

from __future__ import annotations

from harness.regressions.entry import Check, CheckOutcome, Regression, Upstream, Variant
from harness.regressions.registry import (
    ENTRY_POINT_GROUP,
    REGRESSIONS,
    available_regressions,
    get_regression,
    register_regression,
    unregister_regression,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "REGRESSIONS",
    "Check",
    "CheckOutcome",
    "Regression",
    "Upstream",
    "Variant",
    "available_regressions",
    "get_regression",
    "register_regression",
    "unregister_regression",
]
