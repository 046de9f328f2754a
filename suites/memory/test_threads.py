"""harness.memory.threads: allocations in other threads count (TorchDispatchMode is per thread)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from plugin_support import _import_lazy_torch_modules  # noqa: F401  # pyright: ignore[reportUnusedImport]
from torch.utils._python_dispatch import _get_current_dispatch_mode

from harness.memory.tracker import MemoryTracker

MiB = 1 << 20


def _allocate(nbytes: int) -> torch.Tensor:
    return torch.empty(nbytes, dtype=torch.uint8)


def test_a_thread_started_inside_the_block_is_counted() -> None:
    kept: list[torch.Tensor] = []
    with MemoryTracker(devices=("cpu",)) as tracker:
        worker = threading.Thread(target=lambda: kept.append(_allocate(4 * MiB)))
        worker.start()
        worker.join()
    assert tracker.ledger.peak_bytes == 4 * MiB
    (allocation,) = tracker.ledger.live_allocations()
    assert allocation.source is not None and allocation.source.text.startswith("return torch.empty")
    kept.clear()
    assert tracker.ledger.current_bytes == 0


def test_a_pool_thread_that_existed_before_the_block_is_counted() -> None:
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(lambda: None).result()  # the worker exists and waits before the block
        with MemoryTracker(devices=("cpu",)) as tracker:
            result = pool.submit(_allocate, 3 * MiB).result()
        assert tracker.ledger.peak_bytes == 3 * MiB
        assert tracker.ledger.live_allocations()[0].source is not None
        del result
        # After the block the worker's relay is gone or passes ops through: nothing counts.
        pool.submit(_allocate, 5 * MiB).result()
        pool.submit(lambda: None).result()
        assert tracker.ledger.peak_bytes == 3 * MiB
        assert pool.submit(_get_current_dispatch_mode).result() is None  # popped


def test_nested_trackers_both_see_a_pool_thread() -> None:
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(lambda: None).result()
        with MemoryTracker(devices=("cpu",)) as outer, MemoryTracker(devices=("cpu",)) as inner:
            pool.submit(_allocate, MiB).result()
        assert outer.ledger.peak_bytes == inner.ledger.peak_bytes == MiB
        pool.submit(lambda: None).result()
        assert pool.submit(_get_current_dispatch_mode).result() is None


def test_single_thread_trackers_leave_other_threads_alone() -> None:
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(lambda: None).result()
        with MemoryTracker(devices=("cpu",), all_threads=False) as tracker:
            pool.submit(_allocate, MiB).result()
            mine = _allocate(10)
        assert tracker.ledger.peak_bytes == 10
        del mine


def test_budgeted_tests_count_other_threads(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_budget_threads="""
        import threading
        from concurrent.futures import ThreadPoolExecutor

        import pytest
        import torch

        POOL = ThreadPoolExecutor(max_workers=1)
        POOL.submit(lambda: None).result()

        @pytest.mark.memory_budget(peak="1 MiB")
        def test_new_thread():
            t = threading.Thread(target=lambda: torch.empty(8 << 20, dtype=torch.uint8))
            t.start()
            t.join()

        @pytest.mark.memory_budget(peak="1 MiB")
        def test_existing_pool():
            POOL.submit(lambda: torch.empty(8 << 20, dtype=torch.uint8)).result()

        @pytest.mark.memory_budget(peak="1 MiB")
        def test_existing_pool_within_budget():
            POOL.submit(lambda: torch.empty(1 << 10, dtype=torch.uint8)).result()
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*memory budget exceeded on cpu: peak 8.00 MiB*"] * 2)
