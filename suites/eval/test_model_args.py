"""``harness-ref``'s model_args: known model names, devices, the backend and its precedence over
``VLLM_ATTENTION_BACKEND`` (mirrors harness/eval/model_args.py)."""

from __future__ import annotations

import pytest

from harness.errors import HarnessError
from harness.eval.model_args import resolve_model_choice
from harness.reference.backends.flash_attn import FlashAttentionBackend
from harness.reference.backends.flashinfer import FlashInferBackend
from harness.regressions import get_regression


def test_a_hugging_face_name_maps_to_its_shape_and_default_device() -> None:
    choice = resolve_model_choice(
        pretrained="meta-llama/Llama-3.1-8B-Instruct", device=None, environ={}
    )
    assert (choice.preset, choice.device) == ("llama-3.1-8b", "meta:h100-95")
    assert (choice.backend, choice.label) == (FlashInferBackend, None)
    assert resolve_model_choice(pretrained="tiny", device=None, environ={}).device == "cpu"


def test_an_unknown_model_lists_the_known_names() -> None:
    with pytest.raises(HarnessError) as info:
        resolve_model_choice(pretrained="gpt2", device=None, environ={})
    message = str(info.value)
    assert message.startswith("pretrained='gpt2': harness-ref does not know this model's shape")
    assert "meta-llama/Llama-3.1-8B-Instruct" in message and "tiny" in message


@pytest.mark.parametrize(
    ("device", "message"),
    [
        ("cuda", "device='cuda': harness-ref runs on cpu or meta:PROFILE"),
        ("meta:h900", "unknown device profile 'h900'"),
        ("cpu", "does not run on the CPU"),
    ],
)
def test_bad_devices(device: str, message: str) -> None:
    with pytest.raises(HarnessError, match=message):
        resolve_model_choice(pretrained="llama-3.1-8b", device=device, environ={})


def test_the_argument_wins_over_the_environment_variable_as_in_vllm() -> None:
    env = {"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"}
    assert resolve_model_choice(pretrained="tiny", device="cpu", environ=env).backend is (
        FlashAttentionBackend
    )
    choice = resolve_model_choice(
        pretrained="tiny", device="cpu", attention_backend="flashinfer_vllm_v1", environ=env
    )
    assert choice.backend is FlashInferBackend


def test_a_regression_runs_in_place_of_its_own_backend_only() -> None:
    choice = resolve_model_choice(
        pretrained="tiny", device="cpu", regression="flashinfer-oom", environ={}
    )
    # Resolved here, not at import: importing the catalog's variants changes what other suites
    # collect (every MLA builder subclass).
    oom = get_regression("flashinfer-oom").backend
    assert (choice.backend, choice.label) == (oom, "flashinfer-oom")
    with pytest.raises(HarnessError, match="runs FLASHINFER_VLLM_V1, not the FLASH_ATTN_VLLM_V1"):
        resolve_model_choice(
            pretrained="tiny",
            device="cpu",
            regression="flashinfer-oom",
            environ={"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"},
        )
    with pytest.raises(HarnessError, match="an MLA backend"):
        resolve_model_choice(
            pretrained="tiny", device="cpu", regression="aiter-mla-last-page-len", environ={}
        )


@pytest.mark.parametrize("name", ["XFORMERS", "TRITON_MLA", ""])
def test_backends_the_models_cannot_run(name: str) -> None:
    with pytest.raises(HarnessError, match="available: FLASHINFER, FLASH_ATTN"):
        resolve_model_choice(pretrained="tiny", device="cpu", attention_backend=name, environ={})
