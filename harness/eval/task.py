"""lm-eval's own ``gsm8k`` task, pointed at local splits.

The task configuration is the one lm-eval ships (``lm_eval/tasks/gsm8k/gsm8k.yaml``), read from
lm-eval's index of that one directory; only the documents change: ``custom_dataset`` hands lm-eval
the in-memory splits of :mod:`harness.eval.data`. :func:`use_local_splits` does the same to every
gsm8k task of a full index (``harness lm-eval``); :func:`cached_templates` keeps lm-eval from
compiling the same Jinja templates for every document and shot.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Generator
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.eval.data import Gsm8kData

TASK_NAME = "gsm8k"
GSM8K_DATASETS = frozenset({"gsm8k", "openai/gsm8k"})
"""``dataset_path`` values of lm-eval's gsm8k tasks (the Hub's old and new names)."""
REQUIRED_FIELDS = ("doc_to_text", "doc_to_target", "generation_kwargs", "filter_list")


def gsm8k_task_manager() -> Any:
    """An lm-eval ``TaskManager`` over lm-eval's ``gsm8k`` directory alone."""
    import lm_eval.tasks
    from lm_eval.tasks import TaskManager

    gsm8k_dir = Path(lm_eval.tasks.__file__).parent / TASK_NAME
    return TaskManager(include_defaults=False, include_path=str(gsm8k_dir))


def gsm8k_task_config(task_manager: Any, data: Gsm8kData) -> dict[str, Any]:
    """lm-eval's gsm8k configuration with ``data`` as its documents (a spec for ``load``)."""
    entry = task_manager.task_index.get(TASK_NAME)
    if entry is None or entry.cfg is None:
        raise HarnessError("the installed lm-eval has no gsm8k task configuration")
    config: dict[str, Any] = copy.deepcopy(entry.cfg)
    missing = [name for name in REQUIRED_FIELDS if name not in config]
    if missing:
        raise HarnessError(f"lm-eval's gsm8k configuration lacks {', '.join(missing)}")
    return _with_local_splits(config, data)


def reads_gsm8k(config: dict[str, Any]) -> bool:
    """Whether a task configuration reads ``openai/gsm8k``'s ``main`` splits."""
    subset = config.get("dataset_name")
    return config.get("dataset_path") in GSM8K_DATASETS and subset in (None, "main")


def use_local_splits(task_manager: Any, data: Gsm8kData) -> list[str]:
    """Point every task in ``task_manager``'s index that reads gsm8k at ``data`` instead (otherwise
    unchanged); returns their names. ``harness lm-eval`` runs it on lm-eval's own task manager.
    """
    from lm_eval.tasks._yaml_loader import load_yaml

    index: dict[str, Any] = task_manager.task_index
    names: list[str] = []
    for name, entry in list(index.items()):
        if entry.cfg is None or "class" in entry.cfg or not reads_gsm8k(entry.cfg):
            continue
        config: dict[str, Any] = (
            load_yaml(entry.yaml_path, resolve_func=True)
            if entry.yaml_path is not None
            else copy.deepcopy(entry.cfg)
        )
        local = _with_local_splits(config, data)
        index[name] = dataclasses.replace(entry, yaml_path=None, cfg=local)
        names.append(name)
    return names


def _with_local_splits(config: dict[str, Any], data: Gsm8kData) -> dict[str, Any]:
    config.update(
        dataset_path=data.source,
        dataset_name=None,
        dataset_kwargs=None,
        custom_dataset=data.dataset_dict,
    )
    return config


@contextlib.contextmanager
def cached_templates() -> Generator[None, None, None]:
    """Within the block, lm-eval's Jinja environment compiles each template source once.

    lm-eval 0.4.13's ``utils.apply_template`` compiles anew for every document, shot and field
    (EleutherAI/lm-evaluation-harness#1286); the environment is restored afterwards.
    """
    import lm_eval.utils

    env: Any = lm_eval.utils.env  # lm-eval ships no type information
    attributes: dict[str, Any] = env.__dict__
    own: Any = attributes.get("from_string")
    compile_source = env.from_string
    compiled: dict[str, Any] = {}

    def from_string(source: Any, globals: Any = None, template_class: Any = None) -> Any:
        if globals is not None or template_class is not None or not isinstance(source, str):
            return compile_source(source, globals, template_class)
        template = compiled.get(source)
        if template is None:
            template = compiled[source] = compile_source(source)
        return template

    env.from_string = from_string
    try:
        yield
    finally:
        if own is None:
            del env.from_string
        else:
            env.from_string = own
