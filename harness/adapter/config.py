"""The ``vllm_config`` a tree's builders receive: the tree's own defaults, then what vLLM sets.

vLLM's config classes need pydantic and transformers, so the adapter does not construct them:
each section (``model_config``, ``cache_config`` ...) is a :class:`ConfigSection` holding the
literal field defaults read from the tree's own class source
(:func:`field_defaults`), then the values vLLM's engine sets before the
model runner builds anything for one model on one GPU (block size and ``num_gpu_blocks`` from KV
cache sizing, the scheduler limits, no parallelism, no speculative decoding, eager execution).
Reading a field that is neither raises :class:`ConfigGap`, which names it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from harness.vllm_tree.tree import VllmTree, parse_source

_NO_DEFAULT = object()


def find_class(paths: Iterable[Path], name: str) -> tuple[Path, ast.ClassDef] | None:
    """The first top-level ``class name`` in ``paths`` (files that do not exist are skipped)."""
    for path in paths:
        if not path.is_file():
            continue
        for node in parse_source(path).body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return path, node
    return None


def _literal_default(value: ast.expr) -> object:
    """A default written as a literal, ``Field(default=...)`` or ``field(default=...)``."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name | ast.Attribute):
        func = value.func.id if isinstance(value.func, ast.Name) else value.func.attr
        if func in ("Field", "field"):
            for keyword in value.keywords:
                if keyword.arg == "default":
                    return _literal_default(keyword.value)
        return _NO_DEFAULT
    try:
        return ast.literal_eval(value)
    except ValueError:
        return _NO_DEFAULT


def field_defaults(node: ast.ClassDef) -> dict[str, object]:
    """The class's annotated fields whose default is a literal (others are left out)."""
    defaults: dict[str, object] = {}
    for statement in node.body:
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and statement.value is not None
        ):
            value = _literal_default(statement.value)
            if value is not _NO_DEFAULT:
                defaults[statement.target.id] = value
    return defaults


class ConfigGap(AttributeError):
    """A builder read a config field the adapter does not set."""

    def __init__(self, path: str) -> None:
        super().__init__(
            f"the builder read {path}, which the engine adapter does not set "
            "(harness/adapter/config.py)"
        )
        self.path = path


class ConfigSection:
    """One config object: known fields as attributes, anything else a :class:`ConfigGap`."""

    def __init__(self, path: str, values: dict[str, Any]) -> None:
        self.__dict__["_path"] = path
        self.__dict__.update(values)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        raise ConfigGap(f"{self.__dict__['_path']}.{name}")

    def __repr__(self) -> str:
        return f"<adapter {self.__dict__['_path']}>"


class VllmConfigSection(ConfigSection):
    """``vllm_config``: a ``*_config`` section the adapter does not set is the tree's class of
    that name at its literal defaults (``kernel_config`` -> ``KernelConfig``), if it has one."""

    def __init__(self, tree: VllmTree, values: dict[str, Any]) -> None:
        super().__init__("vllm_config", values)
        self.__dict__["_tree"] = tree

    def __getattr__(self, name: str) -> Any:
        if name.endswith("_config") and not name.startswith("_"):
            class_name = "".join(part.title() for part in name.split("_"))
            found = find_class(self.__dict__["_tree"].config_files(), class_name)
            if found is not None:
                value = ConfigSection(f"vllm_config.{name}", field_defaults(found[1]))
                self.__dict__[name] = value
                return value
        return super().__getattr__(name)


@dataclass(frozen=True, slots=True)
class ModelShape:
    """The attention shape of the adapter's model (a small Llama-like or MLA model)."""

    num_layers: int = 2
    num_heads: int = 8
    num_kv_heads: int = 2
    head_size: int = 64
    dtype: torch.dtype = torch.bfloat16
    use_mla: bool = False
    kv_lora_rank: int = 512
    qk_rope_head_dim: int = 64
    qk_nope_head_dim: int = 128
    v_head_dim: int = 128

    @property
    def kv_head_size(self) -> int:
        """Head size of the KV cache: the MLA latent (``kv_lora_rank + rope``) or the head."""
        return self.kv_lora_rank + self.qk_rope_head_dim if self.use_mla else self.head_size

    @property
    def cache_kv_heads(self) -> int:
        return 1 if self.use_mla else self.num_kv_heads


def _defaults(tree: VllmTree, class_name: str) -> dict[str, Any]:
    found = find_class(tree.config_files(), class_name)
    return {} if found is None else field_defaults(found[1])


def _returns(value: Any) -> Callable[..., Any]:
    return lambda *args, **kwargs: value


def make_vllm_config(
    tree: VllmTree,
    shape: ModelShape,
    *,
    block_size: int,
    num_gpu_blocks: int,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    max_model_len: int,
    layers: dict[str, Any],
    cudagraph_mode: Any = None,
) -> ConfigSection:
    """The ``vllm_config`` of the module docstring for ``tree``."""

    def section(name: str, class_name: str, values: dict[str, Any]) -> ConfigSection:
        return ConfigSection(f"vllm_config.{name}", {**_defaults(tree, class_name), **values})

    hf_text_config = ConfigSection(
        "vllm_config.model_config.hf_text_config",
        {
            "num_attention_heads": shape.num_heads,
            "num_key_value_heads": shape.num_kv_heads,
            "head_dim": shape.head_size,
            "model_type": "deepseek_v3" if shape.use_mla else "llama",
            "kv_lora_rank": shape.kv_lora_rank if shape.use_mla else None,
            "qk_rope_head_dim": shape.qk_rope_head_dim,
            "qk_nope_head_dim": shape.qk_nope_head_dim,
            "v_head_dim": shape.v_head_dim,
            "q_lora_rank": None,
            "sliding_window": None,
            "index_topk": None,
        },
    )
    model = section(
        "model_config",
        "ModelConfig",
        {
            "dtype": shape.dtype,
            "max_model_len": max_model_len,
            "use_mla": shape.use_mla,
            "is_deepseek_mla": shape.use_mla,
            "is_diffusion": False,
            "is_mm_prefix_lm": False,
            "is_encoder_decoder": False,
            "is_multimodal_model": False,
            "hf_config": hf_text_config,
            "hf_text_config": hf_text_config,
            "get_num_attention_heads": _returns(shape.num_heads),
            "get_num_kv_heads": _returns(shape.cache_kv_heads),
            "get_head_size": _returns(shape.kv_head_size),
            "get_sliding_window": _returns(None),
            "get_num_layers": _returns(shape.num_layers),
            "rswa_window": None,
        },
    )
    cache = section(
        "cache_config",
        "CacheConfig",
        {
            "block_size": block_size,
            "num_gpu_blocks": num_gpu_blocks,
            "num_cpu_blocks": 0,
            "cache_dtype": "auto",
            "kv_sharing_fast_prefill": False,
            "get_resolved_kv_cache_layout": _returns("NHD"),
        },
    )
    scheduler = section(
        "scheduler_config",
        "SchedulerConfig",
        {
            "max_num_seqs": max_num_seqs,
            "max_num_batched_tokens": max_num_batched_tokens,
            "max_model_len": max_model_len,
            "chunked_prefill_enabled": True,
            "enable_chunked_prefill": True,
        },
    )
    parallel = section(
        "parallel_config",
        "ParallelConfig",
        {
            "tensor_parallel_size": 1,
            "pipeline_parallel_size": 1,
            "data_parallel_size": 1,
            "decode_context_parallel_size": 1,
            "prefill_context_parallel_size": 1,
            "world_size": 1,
        },
    )
    compilation = section(
        "compilation_config",
        "CompilationConfig",
        {
            "static_forward_context": layers,
            "full_cuda_graph": False,
            "cudagraph_mode": cudagraph_mode,
            "max_cudagraph_capture_size": None,
            "cudagraph_capture_sizes": [],
        },
    )
    attention = section("attention_config", "AttentionConfig", {})
    return VllmConfigSection(
        tree,
        {
            "model_config": model,
            "cache_config": cache,
            "scheduler_config": scheduler,
            "parallel_config": parallel,
            "compilation_config": compilation,
            "attention_config": attention,
            "speculative_config": None,
            "num_speculative_tokens": 0,
            "kv_transfer_config": None,
            "lora_config": None,
            "quant_config": None,
            "kv_events_config": None,
            "device_config": ConfigSection(
                "vllm_config.device_config", {"device": torch.device("cpu"), "device_type": "cpu"}
            ),
        },
    )
