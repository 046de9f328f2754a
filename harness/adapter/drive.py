"""Drive one backend of a loaded tree over a serving sequence, as that era's model runner does.

Set-up in the runner's order: attention layers with the backend's own impl, the tree's KV cache
spec, KV caches of ``num_gpu_blocks`` blocks, then the builder: ``builder_cls(runner,
kv_cache_spec, block_table)`` in :attr:`Era.RUNNER` (vLLM 0.9's ``initialize_kv_cache``; the
runner is a view of the adapter's buffers) or ``builder_cls(kv_cache_spec, layer_names,
vllm_config, device)`` in :attr:`Era.SPEC` (vLLM 0.34's ``init_attn_backend``, workspace
included). Each step: the persistent batch takes the scheduler output, the era's reorder runs,
device buffers are filled as the runner fills them, the tree's ``CommonAttentionMetadata`` is
made and ``build`` called with the era's arguments (0.9: the runner's cascade prefix; 0.34:
``common_prefix_len=0``). An exception ends the run, as it ends vLLM's engine. Not run: the
impl's ``forward``, kernels (stubbed), CUDA graphs (eager).
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import torch

from harness.adapter.backends import BackendEntry
from harness.adapter.batch import PersistentBatch, StepInputs
from harness.adapter.config import ConfigGap, ConfigSection, ModelShape, make_vllm_config
from harness.adapter.host_memory import HostMemoryOnly
from harness.adapter.reorder import reorder_for
from harness.adapter.sequence import ServingSequence
from harness.adapter.session import BackendUnavailable, RaisedAt, TreeSession, raised_at
from harness.adapter.snapshot import snapshot
from harness.adapter.stubs import REGISTRY
from harness.child import mark
from harness.errors import HarnessError
from harness.reference.backends.utils import compute_cascade_attn_prefix_len
from harness.vllm_tree.era import Era, builder_era
from harness.vllm_tree.stubbing import LEDGER

PAD_SLOT_ID = -1
H100_NUM_SMS = 132
"""SMs the vLLM 0.9 cascade heuristic is asked about (an H100's, the default platform)."""

Region = Callable[[str], contextlib.AbstractContextManager[object]]
"""Called with a region name (``initialize_kv_cache``, ``construct``, ``step N``)."""


@dataclass
class StepRecord:
    """What one step did: the reorder's swaps, the metadata (or the exception that ended it)."""

    index: int
    req_ids: list[str]
    swaps: list[tuple[int, int]]
    metadata: Any = None
    error: RaisedAt | None = None


@dataclass
class BackendRun:
    """One backend driven over a sequence."""

    backend: str
    era: Era
    builder: str
    block_size: int
    reorder: str
    steps: list[StepRecord] = field(default_factory=list[StepRecord])
    stubs_used: list[str] = field(default_factory=list[str])
    notes: list[str] = field(default_factory=list[str])

    @property
    def error(self) -> RaisedAt | None:
        return self.steps[-1].error if self.steps else None


class AdapterLayer:
    """An attention layer as vLLM's ``Attention`` leaves it for the builders: heads, the impl and
    (after KV cache initialisation) ``kv_cache``."""

    def __init__(self, name: str, shape: ModelShape, impl: Any) -> None:
        self.layer_name = name
        self.num_heads = shape.num_heads
        self.num_kv_heads = shape.cache_kv_heads
        self.head_size = shape.kv_head_size
        self.head_dim = shape.kv_head_size
        self.sliding_window = None
        self.attn_type = "decoder"
        self.kv_sharing_target_layer_name = None
        self.is_draft_layer = False
        self.prefill_backend: Any = None
        self.impl = impl
        self.kv_cache: list[torch.Tensor] = []
        if shape.use_mla:  # what vLLM's MLAAttention layer keeps
            self.q_lora_rank = None
            self.kv_lora_rank = shape.kv_lora_rank
            self.qk_nope_head_dim = shape.qk_nope_head_dim
            self.qk_rope_head_dim = shape.qk_rope_head_dim
            self.qk_head_dim = shape.qk_nope_head_dim + shape.qk_rope_head_dim
            self.v_head_dim = shape.v_head_dim
            self.indexer = None


def _is_mla(entry: BackendEntry, backend_cls: type[Any]) -> bool:
    is_mla = getattr(backend_cls, "is_mla", None)
    if callable(is_mla):
        with contextlib.suppress(Exception):
            return bool(is_mla())
    return ".mla." in entry.class_path


REQUIRED_SETTINGS: dict[str, dict[str, int]] = {
    # vLLM 0.9's ROCm selector (vllm/platforms/rocm.py get_attn_backend_cls) gives AITER MLA
    # block size 1 only, and its builder asserts max_model_len == 32768.
    "ROCM_AITER_MLA": {"block_size": 1, "max_model_len": 32768},
}
"""Settings vLLM's platform code imposes on a backend before its builder exists (vLLM 0.9
has no ``get_supported_kernel_block_sizes`` to ask)."""
DEFAULT_MAX_MODEL_LEN = 2048


def choose_block_size(backend_cls: type[Any], use_mla: bool, required: int | None = None) -> int:
    """16 (64 for MLA, FlashMLA's only size), unless the backend lists kernel block sizes
    without it (then the first size it lists) or vLLM's platform imposes one (``required``)."""
    wanted = required or (64 if use_mla else 16)
    sizes = getattr(backend_cls, "get_supported_kernel_block_sizes", None)
    if not callable(sizes):
        return wanted
    try:
        supported: list[Any] = list(cast("Any", sizes()))
    except Exception:
        return wanted
    ints = [int(s) for s in supported if isinstance(s, int)]
    multiples = [int(getattr(s, "base", 0) or 0) for s in supported if not isinstance(s, int)]
    if wanted in ints or any(m and wanted % m == 0 for m in multiples):
        return wanted
    return ints[0] if ints else next((m for m in multiples if m), wanted)


def _kw_call(
    function: Any, values: dict[str, Any], what: str, extra: dict[str, Any] | None = None
) -> Any:
    """Call ``function`` with the arguments in ``values`` that its signature names (and
    ``extra`` into its ``**kwargs``, if it has them); a required parameter missing from
    ``values`` is a one-line error."""
    parameters = inspect.signature(function).parameters
    kwargs: dict[str, Any] = {}
    if extra and any(p.kind == p.VAR_KEYWORD for p in parameters.values()):
        # Only what some __init__ up the class's MRO names (vLLM 0.9's MLA impls take no
        # ``indexer``; 0.34's do).
        classes: tuple[type[Any], ...] = getattr(function, "__mro__", ())
        inits: list[Any] = [vars(c)["__init__"] for c in classes if "__init__" in vars(c)]
        named = {name for init in inits for name in inspect.signature(init).parameters}
        kwargs.update({k: v for k, v in extra.items() if k in named})
    for name, p in parameters.items():
        if name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if name in values:
            kwargs[name] = values[name]
        elif p.default is inspect.Parameter.empty:
            raise HarnessError(f"{what} requires {name!r}, which the engine adapter does not know")
    return function(**kwargs)


def fill_dataclass(cls: type[Any], values: dict[str, Any]) -> Any:
    """``cls(...)`` from ``values``: fields it lacks keep their defaults; a required field the
    adapter cannot fill is a one-line error naming it."""
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.name in values:
            kwargs[f.name] = values[f.name]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise HarnessError(
                f"{cls.__module__}.{cls.__qualname__} requires field {f.name!r}, which the engine "
                "adapter does not fill"
            )
    return cls(**kwargs)


def _real_class(entry: BackendEntry, role: str, value: object) -> type[Any]:
    """``value`` (what ``get_<role>_cls()`` returned) when it is a class of the tree."""
    if isinstance(value, type) and not value.__dict__.get("_is_stub", False):
        return value
    stub = value.__qualname__ if isinstance(value, type) else type(value).__qualname__
    raise BackendUnavailable(
        entry.name,
        f"get_{role}_cls()",
        f"it is the stub {stub}: {entry.module} is outside the attention path the engine "
        "adapter loads from the tree (harness.adapter.stubs.REAL_PREFIXES)",
    )


@dataclass
class DriveOptions:
    """The run's sizes: the KV cache block count vLLM sized and the model's shape."""

    num_gpu_blocks: int | None = None
    """KV cache blocks vLLM sized (``cache_config.num_gpu_blocks``); default: the sequence's
    pool of blocks."""
    shape: ModelShape = field(default_factory=ModelShape)
    max_model_len: int = DEFAULT_MAX_MODEL_LEN
    record_metadata: bool = True
    """Snapshot each step's metadata (``harness diff``); off for memory runs."""


class BackendDriver:
    """One backend of one tree: set up by :meth:`setup`, stepped by :meth:`run`."""

    def __init__(self, session: TreeSession, entry: BackendEntry, options: DriveOptions) -> None:
        self.session = session
        self.entry = entry
        self.options = options
        self.backend_cls = session.backend_class(entry)
        try:
            builder: object = self.backend_cls.get_builder_cls()
            impl: object = self.backend_cls.get_impl_cls()
        except Exception as exc:
            raise BackendUnavailable(
                entry.name, "get_builder_cls()/get_impl_cls()", raised_at(session.tree, exc)
            ) from exc
        self.builder_cls = _real_class(entry, "builder", builder)
        self.impl_cls = _real_class(entry, "impl", impl)
        self.era = builder_era(self.builder_cls)
        use_mla = _is_mla(entry, self.backend_cls)
        shape = options.shape
        if use_mla != shape.use_mla:
            shape = dataclasses.replace(
                shape, use_mla=use_mla, num_heads=16 if use_mla else shape.num_heads
            )
        self.shape = shape
        required = REQUIRED_SETTINGS.get(entry.name, {})
        self.block_size = choose_block_size(self.backend_cls, use_mla, required.get("block_size"))
        self.max_model_len = required.get("max_model_len", options.max_model_len)
        self.notes: list[str] = []
        """What set-up could not run as vLLM does (said in every report)."""

    # Set-up ---------------------------------------------------------------------------------

    def _impl(self) -> Any:
        s = self.shape
        values: dict[str, Any] = {
            "num_heads": s.num_heads,
            "head_size": s.kv_head_size,
            "scale": s.kv_head_size**-0.5,
            "num_kv_heads": s.cache_kv_heads,
            "alibi_slopes": None,
            "sliding_window": None,
            "kv_cache_dtype": "auto",
            "logits_soft_cap": None,
            "attn_type": "decoder",
            "kv_sharing_target_layer_name": None,
            "blocksparse_params": None,
        }
        mla: dict[str, Any] = {
            "q_lora_rank": None,
            "kv_lora_rank": s.kv_lora_rank,
            "qk_nope_head_dim": s.qk_nope_head_dim,
            "qk_rope_head_dim": s.qk_rope_head_dim,
            "qk_head_dim": s.qk_nope_head_dim + s.qk_rope_head_dim,
            "v_head_dim": s.v_head_dim,
            "kv_b_proj": None,
            "indexer": None,
        }
        if s.use_mla:
            values.update(mla)
        try:
            return _kw_call(
                self.impl_cls,
                values,
                f"{self.impl_cls.__qualname__}.__init__",
                extra=mla if s.use_mla else None,
            )
        except Exception as exc:
            # The impl's constructor sets up kernels (device buffers, JIT): the builders only
            # read its hyperparameters, so the layer gets an impl with those and no __init__.
            cause = (
                str(exc)
                if isinstance(exc, HarnessError)
                else raised_at(self.session.tree, exc).describe()
            )
            note = f"{self.impl_cls.__qualname__}.__init__ not run ({cause})"
            if note not in self.notes:
                self.notes.append(note)
            impl = object.__new__(self.impl_cls)
            impl.__dict__.update(values)
            impl.__dict__.update(sinks=None, kv_sharing_target_layer_name=None)
            if s.use_mla:
                impl.__dict__.update(mla)
            return impl

    def _kv_cache_spec(self) -> Any:
        module = self.session.module("vllm.v1.kv_cache_interface")
        s = self.shape
        values = {
            "block_size": self.block_size,
            "num_kv_heads": s.cache_kv_heads,
            "head_size": s.kv_head_size,
            "dtype": s.dtype,
            "use_mla": s.use_mla,
            "sliding_window": None,
        }
        cls = getattr(module, "MLAAttentionSpec", None) if s.use_mla else None
        spec = fill_dataclass(cls or module.FullAttentionSpec, values)
        customize = getattr(self.backend_cls, "customize_spec", None)
        return customize(spec) if callable(customize) else spec

    def setup(self, sequence: ServingSequence, region: Region) -> None:
        """Layers, spec, KV caches and the builder, for ``sequence``'s limits (stubs strict)."""
        mark(f"setting up {self.entry.name} (layers, KV caches, its builder)")
        LEDGER.strict()
        try:
            with HostMemoryOnly():
                self._setup(sequence, region)
        finally:
            LEDGER.is_strict = False

    def _setup(self, sequence: ServingSequence, region: Region) -> None:
        spec = sequence.spec
        if spec.block_size != self.block_size:
            raise HarnessError(
                f"the sequence has block size {spec.block_size}, {self.entry.name} needs "
                f"{self.block_size}"
            )
        if spec.max_request_len > self.max_model_len:
            raise HarnessError(
                f"the sequence's requests reach {spec.max_request_len} tokens, more than "
                f"max_model_len {self.max_model_len}"
            )
        self.num_gpu_blocks = self.options.num_gpu_blocks or spec.num_blocks
        if self.num_gpu_blocks < spec.num_blocks:
            raise HarnessError(
                f"num_gpu_blocks {self.num_gpu_blocks} is below the sequence's pool of "
                f"{spec.num_blocks} blocks"
            )
        self.layers: dict[str, AdapterLayer] = {}
        self.max_num_reqs = spec.max_num_seqs
        self.max_num_tokens = spec.max_num_batched_tokens
        self.vllm_config = make_vllm_config(
            self.session.tree,
            self.shape,
            block_size=self.block_size,
            num_gpu_blocks=self.num_gpu_blocks,
            max_num_seqs=spec.max_num_seqs,
            max_num_batched_tokens=spec.max_num_batched_tokens,
            max_model_len=self.max_model_len,
            layers=self.layers,
            cudagraph_mode=self._eager_mode(),
        )
        REGISTRY.vllm_config = self.vllm_config
        REGISTRY.layers = self.layers
        self._resolve_kv_cache_layout()
        with region("layers"):
            for i in range(self.shape.num_layers):  # as the model's Attention layers are made
                name = f"model.layers.{i}.self_attn.attn"
                layer = AdapterLayer(name, self.shape, self._impl())
                if self.shape.use_mla:
                    layer.prefill_backend = self._mla_prefill_backend()
                self.layers[name] = layer
            self.kv_cache_spec = self._kv_cache_spec()
        self.batch = PersistentBatch(
            spec.max_num_seqs, self.max_model_len, spec.max_num_batched_tokens, self.block_size
        )
        with region("initialize_kv_cache"):
            self.kv_caches = self._allocate_kv_caches()
        try:
            with region("construct"):
                self.builder = self._construct()
        except Exception as exc:
            cause = (
                raised_at(self.session.tree, exc) if not isinstance(exc, HarnessError) else str(exc)
            )
            raise BackendUnavailable(
                self.entry.name, f"constructing {self.builder_cls.__qualname__}", cause
            ) from exc
        self.reorder_name, self.reorder = reorder_for(self.session, self.builder)

    def _resolve_kv_cache_layout(self) -> None:
        """vLLM 0.34's engine core resolves the KV cache layout once, before profiling: the
        backend's first supported layout (``NHD`` otherwise)."""
        layouts = getattr(self.backend_cls, "supported_kv_cache_layouts", None)
        try:
            module = self.session.module("vllm.v1.kv_cache_layout")
        except ImportError:
            return  # vLLM 0.9: no layout objects
        supported: Any = layouts() if callable(layouts) else None
        layout: Any = supported[0] if supported else module.KVCacheLayout["LBNHC"]
        self.vllm_config.cache_config.__dict__.update(
            kv_cache_layout=layout.name, get_resolved_kv_cache_layout=lambda: layout
        )

    def _mla_prefill_backend(self) -> Any:
        """The MLA layer's prefill backend, made as vLLM 0.34's ``MLAAttention`` makes it."""
        try:
            module = self.session.module("vllm.model_executor.layers.attention.mla_attention")
        except ImportError:
            return None  # vLLM 0.9: the MLA builder makes its own prefill path
        choose = getattr(module, "get_mla_prefill_backend", None)
        if choose is None:
            return None
        s = self.shape
        try:
            return choose(self.vllm_config)(
                num_heads=s.num_heads,
                scale=s.kv_head_size**-0.5,
                kv_lora_rank=s.kv_lora_rank,
                qk_nope_head_dim=s.qk_nope_head_dim,
                qk_rope_head_dim=s.qk_rope_head_dim,
                v_head_dim=s.v_head_dim,
                vllm_config=self.vllm_config,
            )
        except Exception as exc:
            cause = raised_at(self.session.tree, exc).describe()
            raise BackendUnavailable(
                self.entry.name, "choosing the MLA prefill backend", cause
            ) from exc

    def _eager_mode(self) -> Any:
        config = self.session.loader.provided["vllm.config"]
        mode = config.__dict__.get("CUDAGraphMode")
        return None if mode is None else mode.NONE

    def _allocate_kv_caches(self) -> list[torch.Tensor]:
        """Each layer's KV cache: ``get_kv_cache_shape`` (vLLM 0.9) or, for a backend without
        it, the byte buffer of ``num_blocks * page_size_bytes`` vLLM 0.34 allocates."""
        s = self.shape
        get_shape = getattr(self.backend_cls, "get_kv_cache_shape", None)
        values = {
            "num_blocks": self.num_gpu_blocks,
            "block_size": self.block_size,
            "num_kv_heads": s.cache_kv_heads,
            "head_size": s.kv_head_size,
            "cache_dtype_str": "auto",
        }
        caches: list[torch.Tensor] = []
        for layer in self.layers.values():
            if get_shape is None:
                size = self.num_gpu_blocks * self.kv_cache_spec.page_size_bytes
                cache = torch.zeros(size, dtype=torch.uint8)
            else:
                shape = _kw_call(get_shape, values, "get_kv_cache_shape")
                cache = torch.zeros(tuple(shape), dtype=s.dtype)
            layer.kv_cache = [cache]
            caches.append(cache)
        return caches

    def _runner_view(self) -> ConfigSection:
        """The attributes of vLLM 0.9's ``GPUModelRunner`` that its builders read."""
        cfg = self.vllm_config
        n, t = self.max_num_reqs, self.max_num_tokens
        self.query_start_loc = torch.zeros(n + 1, dtype=torch.int32)
        self.seq_lens = torch.zeros(n, dtype=torch.int32)
        self.positions = torch.zeros(t, dtype=torch.int64)
        self.query_start_loc_cpu = torch.zeros(n + 1, dtype=torch.int32)
        self.seq_lens_cpu = torch.zeros(n, dtype=torch.int32)
        return ConfigSection(
            "runner",
            {
                "vllm_config": cfg,
                "model_config": cfg.model_config,
                "cache_config": cfg.cache_config,
                "scheduler_config": cfg.scheduler_config,
                "parallel_config": cfg.parallel_config,
                "compilation_config": cfg.compilation_config,
                "device": torch.device("cpu"),
                "dtype": self.shape.dtype,
                "kv_cache_dtype": self.shape.dtype,
                "num_query_heads": self.shape.num_heads,
                "max_num_reqs": n,
                "max_num_tokens": t,
                "max_model_len": cfg.model_config.max_model_len,
                "block_size": self.block_size,
                "attention_chunk_size": None,
                "cascade_attn_enabled": True,
                "pin_memory": False,
                "input_batch": self.batch.input_batch,
                "kv_caches": self.kv_caches,
                "query_start_loc": self.query_start_loc,
                "query_start_loc_cpu": self.query_start_loc_cpu,
                "query_start_loc_np": self.query_start_loc_cpu.numpy(),
                "seq_lens": self.seq_lens,
                "seq_lens_cpu": self.seq_lens_cpu,
                "seq_lens_np": self.seq_lens_cpu.numpy(),
                "positions": self.positions,
            },
        )

    def _construct(self) -> Any:
        if self.era is Era.RUNNER:
            self.runner = self._runner_view()
            return self.builder_cls(self.runner, self.kv_cache_spec, self.batch.block_table)
        n, t = self.max_num_reqs, self.max_num_tokens
        self.query_start_loc = torch.zeros(n + 1, dtype=torch.int32)
        self.seq_lens = torch.zeros(n, dtype=torch.int32)
        self.positions = torch.zeros(t, dtype=torch.int64)
        self.slot_mapping = torch.full((t,), PAD_SLOT_ID, dtype=torch.int64)
        kwargs: dict[str, Any] = {}
        if getattr(self.builder_cls, "requires_block_table_width", False):
            kwargs["block_table_width"] = self.batch.block_table.max_num_blocks_per_req
        builder = self.builder_cls(
            self.kv_cache_spec, list(self.layers), self.vllm_config, torch.device("cpu"), **kwargs
        )
        workspace = getattr(builder, "_get_workspace_buffer", None)
        if callable(workspace):
            workspace()  # as init_attn_backend does for the first builder
        return builder

    # Steps ----------------------------------------------------------------------------------

    def _common_metadata(self, inputs: StepInputs) -> Any:
        n, t = inputs.num_reqs, inputs.num_tokens
        qsl = torch.as_tensor(inputs.query_start_loc)
        seq_lens = torch.as_tensor(inputs.seq_lens)
        self.query_start_loc[: n + 1].copy_(qsl)
        self.seq_lens[:n].copy_(seq_lens)
        self.positions[:t].copy_(torch.as_tensor(inputs.positions))
        if self.era is Era.RUNNER:
            self.query_start_loc_cpu[: n + 1].copy_(qsl)
            self.seq_lens_cpu[:n].copy_(seq_lens)
            self.seq_lens[n:].fill_(0)
            self.query_start_loc[n + 1 :].fill_(-1)
        table = self.batch.block_table
        self.slot_mapping_filled(t)
        values: dict[str, Any] = {
            "query_start_loc": self.query_start_loc[: n + 1],
            "query_start_loc_cpu": qsl.clone(),
            "seq_lens": self.seq_lens[:n],
            "seq_lens_cpu": seq_lens.clone(),
            "seq_lens_cpu_upper_bound": seq_lens.clone(),
            "num_computed_tokens_cpu": torch.as_tensor(inputs.num_computed_tokens).clone(),
            "num_reqs": n,
            "num_actual_tokens": t,
            "max_query_len": inputs.max_query_len,
            "max_seq_len": int(inputs.seq_lens.max()),
            "block_table_tensor": table.get_device_tensor()[:n],
            "slot_mapping": self.slot_mapping[:t]
            if self.era is Era.SPEC
            else table.slot_mapping[:t],
            "causal": True,
            "positions": self.positions[:t],
            "is_prefilling": torch.as_tensor(inputs.num_computed_tokens < inputs.num_prompt_tokens),
        }
        return fill_dataclass(self._common_metadata_class(), values)

    def _common_metadata_class(self) -> type[Any]:
        """The tree's ``CommonAttentionMetadata`` (``v1/attention/backend.py`` from vLLM 0.10
        on, ``v1/attention/backends/utils.py`` in 0.9)."""
        for name in ("vllm.v1.attention.backend", "vllm.v1.attention.backends.utils"):
            if self.session.loader.is_module(name):
                cls = getattr(self.session.module(name), "CommonAttentionMetadata", None)
                if isinstance(cls, type):
                    return cls
        raise HarnessError(f"{self.session.tree.root} defines no CommonAttentionMetadata")

    def slot_mapping_filled(self, num_tokens: int) -> None:
        """The device slot mapping of the step: the runner's copy of the host one (vLLM 0.34
        pads past ``num_tokens`` with ``PAD_SLOT_ID``; vLLM 0.9's FlashAttention builder makes
        its own copy, so 0.9 gets the block table's buffer untouched)."""
        if self.era is Era.SPEC:
            table = self.batch.block_table
            self.slot_mapping[:num_tokens].copy_(table.slot_mapping_cpu[:num_tokens])
            self.slot_mapping[num_tokens:].fill_(PAD_SLOT_ID)

    def _build(self, inputs: StepInputs, common: Any, num_common_prefix_blocks: int) -> Any:
        if self.era is Era.SPEC:
            return self.builder.build(common_prefix_len=0, common_attn_metadata=common)
        prefix = 0
        if hasattr(self.builder, "use_cascade_attention"):
            prefix = compute_cascade_attn_prefix_len(
                self.builder,
                inputs.num_scheduled_tokens,
                inputs.num_computed_tokens,
                num_common_prefix_blocks,
                self.shape.num_heads,
                H100_NUM_SMS,
            )
        return self.builder.build(
            num_reqs=inputs.num_reqs,
            num_actual_tokens=inputs.num_tokens,
            max_query_len=inputs.max_query_len,
            common_prefix_len=prefix,
            common_attn_metadata=common,
        )

    def run(self, sequence: ServingSequence, region: Region) -> BackendRun:
        """Every step of ``sequence``; stops at the first exception (recorded)."""
        result = BackendRun(
            backend=self.entry.name,
            era=self.era,
            builder=f"{self.builder_cls.__module__}.{self.builder_cls.__qualname__}",
            block_size=self.block_size,
            reorder=self.reorder_name,
            notes=list(self.notes),
        )
        recorder = self.session.recorder
        LEDGER.used.clear()
        for index, output in enumerate(sequence.steps):
            mark(f"{self.entry.name} step {index} (the tree's reorder and build)")
            record = StepRecord(index, [], [])
            result.steps.append(record)
            recorder.calls.clear()
            LEDGER.strict()
            try:
                with region(f"step {index}"), HostMemoryOnly():
                    self.batch.update(output)
                    record.swaps = self.reorder(self.batch, output)
                    inputs = self.batch.prepare(output)
                    record.req_ids = inputs.req_ids
                    common = self._common_metadata(inputs)
                    prefix_blocks = (output.num_common_prefix_blocks or [0])[0]
                    metadata = self._build(inputs, common, prefix_blocks)
            except (Exception, SystemExit) as exc:  # SystemExit: the tree's code called sys.exit
                record.error = raised_at(self.session.tree, exc)
                if isinstance(exc, ConfigGap | HarnessError):
                    record.error = RaisedAt(type(exc).__name__, str(exc), record.error.where)
                break
            finally:
                LEDGER.is_strict = False
            if self.options.record_metadata:
                record.metadata = {"metadata": snapshot(metadata), "plans": self._plans()}
        result.stubs_used = sorted(LEDGER.used)
        return result

    def _plans(self) -> list[Any]:
        return [
            {"wrapper": kind, "call": method, "args": snapshot(args), "kwargs": snapshot(kwargs)}
            for kind, method, args, kwargs in self.session.recorder.calls
        ]
