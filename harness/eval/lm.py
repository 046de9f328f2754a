"""``harness-ref``: an lm-eval model backed by the reference engine.

It follows lm-eval 0.4.13's ``vllm`` model (``lm_eval/models/vllm_causallms.py``): batch
tokenisation with BOS, the ``Collator``'s longest-first order, one ``generate`` call with
``batch_size=auto``, lm-eval's own ``normalize_gen_kwargs``, ``handle_stop_sequences``,
``maybe_truncate`` and ``postprocess_generated_text``. The engine is
:class:`~harness.eval.engine.ReferenceEngine` on ``device=cpu`` and
:class:`~harness.eval.simulated.SimulatedEngine` on ``device=meta:PROFILE``; loglikelihoods come
from a dense CPU forward (on ``meta`` they raise).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import lm_eval.api.model as lm_eval_model
import lm_eval.models.utils as lm_eval_models_utils
import lm_eval.utils as lm_eval_utils

from harness.errors import HarnessError
from harness.eval.data import load_gsm8k
from harness.eval.engine import CompletionOutput, ReferenceEngine, SamplingParams
from harness.eval.model_args import check_seed, resolve_model_choice
from harness.eval.simulated import SimulatedEngine, vllm_default_limits
from harness.eval.tokenizer import Tokenizer
from harness.memory.devices import get_device_profile
from harness.reference.backends.abstract import AttentionBackend
from harness.reference.config import (
    SchedulerConfig,
    VllmConfig,
    get_model_config,
    llm_class_scheduler_config,
)

# lm-eval ships no type information; its objects are used as ``Any``.
TemplateLM: Any = lm_eval_model.TemplateLM
lm_utils: Any = lm_eval_models_utils
lm_base_utils: Any = lm_eval_utils

MODEL_NAME = "harness-ref"
CPU_MAX_MODEL_LEN = 2048
"""lm-eval's ``DEFAULT_MAX_LENGTH``: the tiny model's context on the CPU."""
CPU_NUM_GPU_BLOCKS = 4096
"""KV cache blocks on the CPU (vLLM's ``num_gpu_blocks_override``): 65,536 tokens of 16."""


class HarnessRefLM(TemplateLM):  # type: ignore[misc]  # lm_eval is untyped
    """lm-eval's ``vllm`` model with the reference engine in vLLM's place (module docstring).

    ``model_args`` (:mod:`harness.eval.model_args` checks the first four):

    - ``pretrained``: ``tiny`` (default) or ``meta-llama/Llama-3.1-8B-Instruct``
      (= ``llama-3.1-8b``, default device ``meta:h100-95``, seeded output lengths, empty texts);
    - ``device``: ``cpu`` or ``meta:PROFILE``; ``attention_backend``: ``FLASHINFER`` or
      ``FLASH_ATTN`` (else ``VLLM_ATTENTION_BACKEND``, else FlashInfer);
    - ``regression``: a catalog name or ``MODULE:ATTR`` run in place of that backend (a caller that
      resolved it passes ``backend=<class>``, and ``regression`` is its label);
    - ``data``, ``seed``, ``max_gen_toks`` (256), ``max_length``, ``max_num_seqs``,
      ``max_num_batched_tokens``, ``num_gpu_blocks``, ``gpu_memory_utilization``, ``quiet``,
      ``track_memory`` (CPU, on by default).
    """

    def __init__(
        self,
        pretrained: str = "tiny",
        device: str | None = None,
        attention_backend: str | None = None,
        regression: str | None = None,
        backend: type[AttentionBackend] | None = None,
        data: str | None = None,
        seed: int = 0,
        batch_size: int | str = "auto",
        max_gen_toks: int = 256,
        max_length: int | None = None,
        max_num_seqs: int | None = None,
        max_num_batched_tokens: int | None = None,
        num_gpu_blocks: int = CPU_NUM_GPU_BLOCKS,
        gpu_memory_utilization: float = 0.9,
        quiet: bool = False,
        track_memory: bool = True,
        max_batch_size: int | None = None,
        trust_remote_code: bool = False,
    ) -> None:
        super().__init__()  # pyright: ignore[reportUnknownMemberType]
        # lm-eval passes max_batch_size to every model (vLLM's maps it to max_num_seqs) and
        # trust_remote_code with --trust_remote_code; there is no remote code here.
        del max_batch_size, trust_remote_code
        self.batch_size: int | str = (
            "auto" if isinstance(batch_size, str) and "auto" in batch_size else int(batch_size)
        )
        self._max_gen_toks = int(max_gen_toks)
        self.quiet = bool(quiet)
        seed = check_seed(seed)
        self.harness_tokenizer: Tokenizer = load_gsm8k(data, seed).tokenizer
        choice = resolve_model_choice(
            pretrained=str(pretrained),
            device=None if device is None else str(device),
            attention_backend=None if attention_backend is None else str(attention_backend),
            regression=None if regression is None else str(regression),
            backend=backend,
        )
        model, device, backend, label = choice.preset, choice.device, choice.backend, choice.label
        if device == "cpu":
            preset = get_model_config(model)
            config = dataclasses.replace(
                preset,
                vocab_size=max(preset.vocab_size, self.harness_tokenizer.vocab_size),
                max_model_len=max(preset.max_model_len, CPU_MAX_MODEL_LEN),
            )
            defaults = llm_class_scheduler_config(
                large_gpu=False, max_model_len=config.max_model_len
            )
            self.engine: ReferenceEngine | SimulatedEngine = ReferenceEngine(
                VllmConfig(
                    model_config=config,
                    scheduler_config=_limits(defaults, max_num_seqs, max_num_batched_tokens),
                ),
                self.harness_tokenizer,
                backend=backend,
                num_gpu_blocks=int(num_gpu_blocks),
                seed=int(seed),
                track_memory=track_memory,
            )
        else:  # meta:PROFILE (resolve_model_choice accepts nothing else)
            profile = get_device_profile(device.removeprefix("meta:"))
            config = get_model_config(model)
            defaults = vllm_default_limits(profile, config.max_model_len)
            self.engine = SimulatedEngine(
                model=model,
                device=profile.name,
                regression=label,
                backend=backend,
                limits=_limits(defaults, max_num_seqs, max_num_batched_tokens),
                gpu_memory_utilization=float(gpu_memory_utilization),
                seed=int(seed),
            )
        self.device_name = device
        self._max_length = int(max_length) if max_length else self.engine.max_model_len
        if self._max_gen_toks >= self._max_length:
            raise HarnessError(
                f"max_gen_toks={self._max_gen_toks} leaves no room for a prompt in the model's "
                f"{self._max_length} tokens"
            )

    # lm-eval's tokenizer interface -------------------------------------------------------------

    @property
    def eot_token_id(self) -> int:
        return self.harness_tokenizer.eos_token_id

    @property
    def prefix_token_id(self) -> int:
        return self.harness_tokenizer.bos_token_id

    @property
    def max_length(self) -> int:
        return self._max_length

    @property
    def max_gen_toks(self) -> int:
        return self._max_gen_toks

    @property
    def tokenizer_name(self) -> str:
        return "harness-word-level"

    def tok_encode(
        self, string: str, add_special_tokens: bool | None = None, **kwargs: Any
    ) -> list[int]:
        """BOS and the ids of ``string`` (no BOS when ``add_special_tokens`` is False or the
        string already starts with the BOS text), as lm-eval's vLLM model with Llama 3's
        tokenizer."""
        del kwargs
        tokenizer = self.harness_tokenizer
        add_bos = add_special_tokens is not False and not string.startswith(tokenizer.bos_token)
        return tokenizer.encode(string, add_bos=add_bos)

    def tok_decode(self, tokens: list[int]) -> str:
        return self.harness_tokenizer.decode(tokens)

    # Requests ----------------------------------------------------------------------------------

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        """Greedy generation until a stop string, EOS or ``max_gen_toks`` (lm-eval's vLLM flow)."""
        reqs = [((r.args[0], self.tok_encode(r.args[0])), r.args[1]) for r in requests]
        reorder: Any = lm_utils.Collator(reqs, _longest_first, group_by=None)
        chunks: Any = reorder.get_batched(n=0 if self.batch_size == "auto" else self.batch_size)
        eos = self.harness_tokenizer.eos_token
        results: list[str] = []
        for chunk in chunks:
            prompts: list[list[int]] = []
            params: list[SamplingParams] = []
            cache_kwargs: list[dict[str, Any]] = []
            for (_, tokens), gen_kwargs in chunk:
                if not isinstance(gen_kwargs, dict):
                    raise TypeError(f"gen_kwargs must be a dict, got {type(gen_kwargs)}")
                kwargs: dict[str, Any] = lm_utils.normalize_gen_kwargs(
                    gen_kwargs, default_max_gen_toks=self.max_gen_toks
                )
                if kwargs.get("do_sample"):
                    raise HarnessError("harness-ref decodes greedily only (do_sample=True asked)")
                until: list[str] = lm_utils.handle_stop_sequences(
                    kwargs.pop("until", None), eos=eos
                )
                max_gen_toks = int(kwargs.pop("max_gen_toks", self.max_gen_toks))
                tokens, max_gen_toks = lm_utils.maybe_truncate(
                    tokens, max_gen_toks=max_gen_toks, max_model_len=self.max_length
                )
                prompts.append(tokens)
                params.append(SamplingParams(max_tokens=max_gen_toks, stop=tuple(until)))
                cache_kwargs.append(kwargs | {"until": until, "max_gen_toks": max_gen_toks})
            outputs: list[CompletionOutput] = self.engine.generate(
                prompts,
                params,
                use_tqdm=self.batch_size == "auto" and not (disable_tqdm or self.quiet),
            )
            for output, ((context, _), _), gen_kwargs in zip(
                outputs, chunk, cache_kwargs, strict=True
            ):
                text: str = lm_utils.postprocess_generated_text(
                    output.text, gen_kwargs["until"], None
                )
                results.append(text)
                self.cache_hook.add_partial("generate_until", (context, gen_kwargs), text)
        reordered: list[str] = reorder.get_original(results)
        return reordered

    def _loglikelihood_tokens(
        self,
        requests: Sequence[tuple[tuple[str, str] | None, list[int], list[int]]],
        disable_tqdm: bool = False,
        **kwargs: Any,
    ) -> list[tuple[float, bool]]:
        del disable_tqdm, kwargs
        engine = self.engine
        if not isinstance(engine, ReferenceEngine):
            raise HarnessError(
                "loglikelihood needs values: run it with --device cpu (meta tensors have none)"
            )
        results: list[tuple[float, bool]] = []
        for cache_key, context, continuation in requests:
            tokens = (context + continuation)[-(self.max_length + 1) :]
            answer = engine.score(tokens, len(continuation))
            results.append(answer)
            if cache_key is not None:
                self.cache_hook.add_partial("loglikelihood", cache_key, answer)
        return results

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
        """Sum of per-window log-likelihoods over lm-eval's disjoint rolling windows."""
        totals: list[float] = []
        for req in requests:
            (string,) = req.args
            windows = [
                (None, *lm_base_utils.make_disjoint_window(window))
                for window in lm_base_utils.get_rolling_token_windows(
                    token_list=self.tok_encode(string, add_special_tokens=False),
                    prefix_token=self.prefix_token_id,
                    max_seq_len=self.max_length,
                    context_len=1,
                )
            ]
            scores = self._loglikelihood_tokens(windows, disable_tqdm=True)
            total = sum(logprob for logprob, _ in scores)
            totals.append(total)
            self.cache_hook.add_partial("loglikelihood_rolling", (string,), total)
        return totals

    # Reporting ---------------------------------------------------------------------------------

    def get_model_info(self) -> dict[str, Any]:
        """What lm-eval records under ``config`` in its results."""
        return {
            "model_device": self.device_name,
            "tokenizer_vocab": self.harness_tokenizer.vocab_size,
        }


def _longest_first(request: tuple[tuple[str, list[int]], object]) -> tuple[int, str]:
    """lm-eval's vLLM sort key: longest prompt first (an OOM shows at once), then the text."""
    (context, tokens), _ = request
    return -len(tokens), context


def _limits(
    defaults: SchedulerConfig, max_num_seqs: int | None, max_num_batched_tokens: int | None
) -> SchedulerConfig:
    """``defaults`` with the limits the user gave."""
    return dataclasses.replace(
        defaults,
        max_num_seqs=int(max_num_seqs or defaults.max_num_seqs),
        max_num_batched_tokens=int(max_num_batched_tokens or defaults.max_num_batched_tokens),
    )


def register() -> None:
    """Register ``harness-ref`` with lm-eval (idempotent); ``lm_eval.models`` is imported first, as
    registering into an empty registry would hide every built-in model.
    """
    import lm_eval.models  # noqa: F401  # pyright: ignore[reportUnusedImport]  # registers built-ins
    from lm_eval.api.registry import model_registry

    if MODEL_NAME in model_registry:
        if model_registry.get(MODEL_NAME) is not HarnessRefLM:
            raise HarnessError(f"lm-eval model {MODEL_NAME!r} is registered to another class")
        return
    model_registry.register(MODEL_NAME)(HarnessRefLM)
