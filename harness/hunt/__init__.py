"""``harness hunt``: the main job, every check on built-in defaults, one summary and reports.

Public API: :func:`harness.hunt.job.hunt` returns a :class:`~harness.hunt.job.HuntReport`;
:func:`harness.hunt.report.write_reports` writes ``hunt.md``, ``hunt.json`` and the memory plots.
"""
