"""Commands started with SIGINT set one way, whatever the suite itself inherited."""

from __future__ import annotations

import signal
import sys


def with_sigint(disposition: signal.Handlers) -> list[str]:
    """An argv prefix that runs the command after it with SIGINT at ``disposition``: ``SIG_DFL``
    as a terminal's shell leaves it, ``SIG_IGN`` as a background job of a shell without job
    control starts it (``exec`` keeps either for the command)."""
    code = (
        f"import os, signal, sys; signal.signal(signal.SIGINT, signal.{disposition.name}); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    return [sys.executable, "-c", code]
