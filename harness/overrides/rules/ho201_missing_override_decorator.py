"""HO201 missing-override-decorator (optional; enable with ``--select HO201``)

## What it does
Reports a method that overrides a base-class method without ``@typing.override`` (or
``typing_extensions.override``).

## Why it matters
``@override`` records the intent, so that renaming the base method (vLLM PR #17483 changed
``_build_decode``'s parameters) makes type checkers and HO202 flag the subclass method that no
longer overrides anything.

## Example
```python
class AiterMLAMetadataBuilder(MLACommonMetadataBuilder):
    def _build_decode(self, block_table_tensor, seq_lens): ...
```

## Use instead
```python
class AiterMLAMetadataBuilder(MLACommonMetadataBuilder):
    @override  # from typing_extensions import override
    def _build_decode(self, block_table_tensor, seq_lens): ...
```

## Limitations
Off by default: most code bases, vLLM included, do not use ``@override`` yet. Constructor
hooks and name-mangled methods are not reported.

## References
- PEP 698 (``typing.override``)
"""

from __future__ import annotations

from harness.overrides.rules._facts import Issue, Pair

CODE = "HO201"
SYMBOL = "missing-override-decorator"
MESSAGE = "{override}() overrides {base}() without @override"
DESCRIPTION = "An override is not decorated with @typing.override."
ENABLED_BY_DEFAULT = False
SUBJECT = Pair


def check(pair: Pair) -> list[Issue]:
    return [] if pair.override.has_override_decorator else [Issue()]
