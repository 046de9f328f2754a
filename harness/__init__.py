"""harness: regression hunting for per-KV-cache-group attention metadata builders."""

__version__ = "0.1.0"
VLLM_VERSION = "0.9.0"
"""The vLLM release whose names and semantics the reference implementation follows."""
