"""lm-eval's own gsm8k configuration over local documents."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("lm_eval")

from lm_eval.tasks import TaskManager

from harness.eval.data import load_gsm8k
from harness.eval.task import gsm8k_task_config, gsm8k_task_manager


def test_the_config_is_lm_evals_with_local_documents() -> None:
    manager = gsm8k_task_manager()
    assert len(manager.all_tasks) < 20  # lm-eval's gsm8k directory, not every built-in task
    data = load_gsm8k(None, 0)
    config = gsm8k_task_config(manager, data)
    assert config["doc_to_text"] == "Question: {{question}}\nAnswer:"
    assert [f["name"] for f in config["filter_list"]] == ["strict-match", "flexible-extract"]
    assert "Question:" in config["generation_kwargs"]["until"]
    assert config["custom_dataset"] == data.dataset_dict
    assert config["dataset_path"] == "generated:seed=0"
    tasks = manager.load([config])["tasks"]
    task = tasks["gsm8k"]
    assert len(task.test_docs()) == 1319 and len(task.fewshot_docs()) == 7473


def test_cached_templates_build_the_same_requests_and_restore_lm_eval() -> None:
    import lm_eval.utils

    from harness.eval.task import cached_templates

    manager = gsm8k_task_manager()
    data = load_gsm8k(None, 0)

    def requests() -> list[tuple[object, ...]]:
        task = manager.load([gsm8k_task_config(manager, data)])["tasks"]["gsm8k"]
        task.set_config(key="num_fewshot", value=5)
        task.set_fewshot_seed(seed=1234)
        task.build_all_requests(limit=6)
        return [instance.args for instance in task.instances]

    plain = requests()
    with cached_templates():
        cached = requests()
    assert cached == plain
    assert plain[0][0].count("Question: ") == 6  # five shots and the question
    assert "from_string" not in vars(lm_eval.utils.env)  # lm-eval's environment is restored


def test_use_local_splits_points_every_gsm8k_task_at_the_local_data() -> None:
    import lm_eval.tasks

    from harness.eval.task import use_local_splits

    gsm8k_dir = Path(lm_eval.tasks.__file__).parent / "gsm8k"
    manager = TaskManager(include_defaults=False, include_path=str(gsm8k_dir))
    data = load_gsm8k(None, 0)
    names = use_local_splits(manager, data)
    assert {"gsm8k", "gsm8k_cot", "gsm8k_cot_llama"} <= set(names)
    # Without it, loading gsm8k by name would call datasets.load_dataset("openai/gsm8k").
    task = manager.load(["gsm8k_cot"])["tasks"]["gsm8k_cot"]
    assert task.config.dataset_path == "generated:seed=0"
    assert len(task.test_docs()) == 1319
    assert task.config.doc_to_text.startswith("Q: ")  # gsm8k-cot.yaml's own template
