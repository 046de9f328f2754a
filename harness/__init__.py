"""harness: regression hunting for per-KV-cache-group attention metadata builders."""

__version__ = "0.1.0"
VLLM_VERSION = "0.9.0"
"""The vLLM release whose names and semantics the reference implementation follows by default."""
VLLM_DEVIATIONS = "docs/fidelity.md"
"""Where every behaviour kept from a later vLLM on purpose is listed, with its version."""
