"""HO303 stale-baseline-entry

## What it does
Reports an entry of the ``--baseline`` file that no current finding matches, at its line in
that file. ``--write-baseline`` writes the file again without it.

## Why it matters
A stale entry silently accepts the next finding with the same key (rule, severity, class,
method, parameters): once the ROCm ``_build_decode`` rename of vLLM PR #17483 is fixed, its
baselined warning would accept the rename again if someone reintroduced it.

## Example
```json
{"version": 2, "tool": "harness overrides",
 "findings": ["HO101:warning:vllm.attention.backends.mla.rocm_aiter_mla.AiterMLAMetadataBuilder._build_decode:block_table_tensor,block_table"]}
```

## Use instead
Write the baseline again: ``harness overrides --write-baseline overrides-baseline.json vllm``.

## Limitations
Reported only by whole-tree runs: with ``--changed`` most entries are out of scope.

## References
- pylint's ``useless-suppression`` (I0021); mypy ``unused-ignore``
"""

from __future__ import annotations

from harness.overrides.baseline import StaleEntry
from harness.overrides.rules._facts import Issue

CODE = "HO303"
SYMBOL = "stale-baseline-entry"
MESSAGE = "baseline entry '{key}' matches no finding (--write-baseline drops it)"
DESCRIPTION = "A baseline entry that no current finding matches."
SUBJECT = StaleEntry


def check(entry: StaleEntry) -> list[Issue]:
    return [Issue((), (("key", entry.key),), key=entry.key)]
