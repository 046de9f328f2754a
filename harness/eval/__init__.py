"""gsm8k through lm-eval into the reference engine: the ``harness-ref`` model and ``harness eval``.

Needs the ``eval`` extra (lm-eval). Modules: :mod:`~harness.eval.problems` (gsm8k-format problem
generator), :mod:`~harness.eval.data` (generated or local splits), :mod:`~harness.eval.tokenizer`
(a word-level tokenizer learnt locally), :mod:`~harness.eval.task` (lm-eval's gsm8k task over local
data), :mod:`~harness.eval.engine` (the CPU engine), :mod:`~harness.eval.simulated` (the
simulated-GPU engine and its length model), :mod:`~harness.eval.lm` (the lm-eval model),
:mod:`~harness.eval.gsm8k` (the run), :mod:`~harness.eval.report` and :mod:`~harness.eval.cli`.
"""
