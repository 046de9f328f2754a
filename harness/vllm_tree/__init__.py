"""A vLLM source tree, as the engine adapter and the fidelity differentials both use it.

Located and indexed by name from its text (:mod:`~harness.vllm_tree.tree`), fetched from a
released wheel (:mod:`~harness.vllm_tree.fetch`), its builders' API era read from signatures
(:mod:`~harness.vllm_tree.era`), its modules loaded from its files (:mod:`~harness.vllm_tree.loader`)
beside automatic stubs that refuse use (:mod:`~harness.vllm_tree.stubbing`) and provided ones
(:mod:`~harness.vllm_tree.provided`), and single definitions run out of a file
(:mod:`~harness.vllm_tree.extract`). Nothing in a tree is written; the installed ``vllm`` is never
imported.
"""
