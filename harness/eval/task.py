"""lm-eval's own ``gsm8k`` task, pointed at local splits.

The task configuration is the one lm-eval ships (``lm_eval/tasks/gsm8k/gsm8k.yaml``: the
``"Question: {{question}}\\nAnswer:"`` template, ``until`` stop sequences, the ``strict-match``
and ``flexible-extract`` filters, ``exact_match`` with its regexes, 5 shots from ``train``), read
from lm-eval's index of that one directory, so a change upstream shows up here. Only where the
documents come from changes: ``custom_dataset`` hands lm-eval the in-memory splits of
:mod:`harness.eval.data` instead of ``datasets.load_dataset("openai/gsm8k")``.

The task manager indexes only lm-eval's ``gsm8k`` directory (a handful of files) instead of all
built-in tasks (thousands of YAML files, seconds).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.eval.data import Gsm8kData

TASK_NAME = "gsm8k"
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
    config.update(
        dataset_path=data.source,
        dataset_name=None,
        dataset_kwargs=None,
        custom_dataset=data.dataset_dict,
    )
    return config
