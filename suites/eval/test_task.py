"""lm-eval's own gsm8k configuration over local documents."""

from __future__ import annotations

import pytest

pytest.importorskip("lm_eval")

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
