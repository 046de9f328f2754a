"""gsm8k through lm-eval into the reference engine: the ``harness-ref`` model and ``harness eval``.

Needs the ``eval`` extra (lm-eval). :mod:`~harness.eval.lm` is the lm-eval model, over
:mod:`~harness.eval.engine` (CPU) or :mod:`~harness.eval.simulated` (a simulated GPU); data,
tokenizer and task are local (:mod:`~harness.eval.data`, ``tokenizer``, ``task``).
"""
