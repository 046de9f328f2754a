"""harness.memory.tracker: live storage accounting under a TorchDispatchMode."""

from __future__ import annotations

import gc
import inspect

import pytest
import torch

from harness.memory.allocation import Allocation
from harness.memory.ledger import Ledger
from harness.memory.tracker import MemoryTracker

F32 = 4


def _next_line() -> int:
    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return frame.f_back.f_lineno + 1


def test_views_allocate_nothing() -> None:
    base = torch.ones(32, 64)
    with MemoryTracker() as tracker:
        views = [base.t(), base[1:], base.view(64, 32), base.reshape(-1), base.unsqueeze(0)]
        views += list(base.split(8))
        views.append(base.permute(1, 0).t())
    assert tracker.ledger.current_bytes == 0
    assert tracker.ledger.peak_bytes == 0
    assert tracker.ledger.num_allocations == 0
    assert views  # keep them alive until here


def test_contiguous_of_permuted_allocates_but_contiguous_of_contiguous_does_not() -> None:
    base = torch.ones(32, 64)
    with MemoryTracker() as tracker:
        same = base.contiguous()
        assert tracker.ledger.current_bytes == 0
        copy = base.t().contiguous()
    assert tracker.ledger.current_bytes == 32 * 64 * F32
    assert tracker.ledger.peak_allocations()[0].op == "aten.clone.default"
    assert same is base and copy.is_contiguous()


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_may_alias_ops_that_copy_under_inference_mode_allocate(device: str) -> None:
    # Under inference_mode, .contiguous() dispatches as aten.contiguous, whose schema says it
    # *may* return its input; for a permuted input it returns a new storage (vLLM's runner runs
    # in inference_mode, and the FlashInfer OOM was such a copy).
    base = torch.ones(32, 64, device=device)
    with MemoryTracker(devices=(device,)) as tracker, torch.inference_mode():
        views = [base.t(), base.view(-1), base.contiguous()]
        assert tracker.ledger.current_bytes == 0
        copy = base.t().contiguous()
    assert tracker.ledger.current_bytes == 32 * 64 * F32
    assert copy.is_contiguous() and views


def test_copy_to_another_device_allocates_there() -> None:
    base = torch.ones(16, 16)
    with MemoryTracker(devices=("meta",)) as tracker, torch.inference_mode():
        moved = base.to("meta")
    assert tracker.ledger.current_bytes == 16 * 16 * F32
    assert moved.device.type == "meta"


def test_clone_and_factory_ops_allocate_their_storage() -> None:
    with MemoryTracker() as tracker:
        a = torch.zeros(100, dtype=torch.int64)
        b = a.clone()
        c = torch.empty(3, 5, dtype=torch.bfloat16)
    assert tracker.ledger.current_bytes == 800 + 800 + 30
    assert [x.nbytes for x in tracker.ledger.live_allocations()] == [800, 800, 30]
    del a, b, c


def test_out_argument_that_grows_a_tracked_storage_counts_new_minus_old() -> None:
    x = torch.ones(1000)
    with MemoryTracker() as tracker:
        out = torch.empty(10).resize_(0)  # an emptied out tensor keeps its 10-element storage
        torch.add(x, x, out=out)
        assert tracker.ledger.current_bytes == 1000 * F32
        # torch allocates the new buffer before it drops the old one: both were live together
        assert tracker.ledger.peak_bytes == 1010 * F32
        grown = tracker.ledger.live_allocations()[0]
        assert grown.op == "aten.add.out" and grown.nbytes == 1000 * F32
        torch.add(x[:5], x[:5], out=out.resize_(0))  # shrinking keeps the storage
    assert tracker.ledger.current_bytes == 1000 * F32
    del out


def test_out_argument_that_grows_an_untracked_storage_counts_the_new_buffer() -> None:
    x = torch.ones(256)
    out = torch.empty(0)
    with MemoryTracker() as tracker:
        torch.mul(x, 2, out=out)
    assert tracker.ledger.current_bytes == 256 * F32
    del out
    assert tracker.ledger.current_bytes == 0


def test_resize_grows_storage() -> None:
    with MemoryTracker() as tracker:
        t = torch.empty(4)
        t.resize_(400)
    assert tracker.ledger.current_bytes == 400 * F32
    assert tracker.ledger.peak_bytes == 404 * F32
    del t


def test_in_place_ops_allocate_nothing() -> None:
    x = torch.ones(1000)
    with MemoryTracker() as tracker:
        x.add_(1).mul_(2)
        x[:10].zero_()
    assert tracker.ledger.peak_bytes == 0


def test_frees_are_observed_inside_and_after_the_block() -> None:
    with MemoryTracker(Ledger(record_timeline=True)) as tracker:
        a = torch.empty(1024)
        b = torch.empty(2048)
        del a
        assert tracker.ledger.current_bytes == 2048 * F32
    assert tracker.ledger.peak_bytes == 3072 * F32
    view = b[10:]
    del b
    assert tracker.ledger.current_bytes == 2048 * F32  # the view keeps the storage alive
    del view
    gc.collect()
    assert tracker.ledger.current_bytes == 0
    assert [p.live_bytes for p in tracker.ledger.timeline] == [4096, 12288, 8192, 0]


def test_temporaries_inside_an_expression_count_towards_the_peak() -> None:
    x = torch.ones(1000)
    with MemoryTracker() as tracker:
        y = (x * 2 + 1) * 3  # two temporaries die inside the expression
    assert tracker.ledger.current_bytes == 1000 * F32
    assert tracker.ledger.peak_bytes == 2000 * F32
    del y


def test_meta_tensors_are_tracked_and_cpu_only_tracker_ignores_them() -> None:
    with MemoryTracker(devices=("cpu",)) as cpu_only, MemoryTracker() as both:
        m = torch.empty(1 << 30, dtype=torch.bfloat16, device="meta")
        c = torch.empty(8)
    assert both.ledger.current_bytes == (2 << 30) + 32
    assert cpu_only.ledger.current_bytes == 32
    assert m.device.type == "meta" and c.numel() == 8


def test_peak_allocations_are_the_ones_live_at_the_peak_with_op_and_source_line() -> None:
    with MemoryTracker() as tracker:
        small = torch.empty(10)
        line = _next_line()
        big = torch.ones(100, 100).t().contiguous()
        del big
        later = torch.empty(50)  # allocated after the peak: not listed
    top = tracker.ledger.peak_allocations(3)
    assert tracker.ledger.peak_bytes == 40 + 2 * 40000
    assert [a.nbytes for a in top] == [40000, 40000, 40]
    clone = top[0] if top[0].op == "aten.clone.default" else top[1]
    assert clone.op == "aten.clone.default"
    assert clone.shape == (100, 100) and clone.dtype == torch.float32 and clone.device == "cpu"
    assert clone.source is not None
    assert clone.source.path == __file__ and clone.source.line == line
    assert clone.source.text == "big = torch.ones(100, 100).t().contiguous()"
    assert str(clone.source).endswith(f"test_tracker.py:{line}")
    assert "aten.clone.default [100x100 float32 cpu] at" in clone.describe()
    summary = tracker.ledger.summary(2)
    assert "peak 78.16 KiB (80040 bytes)" in summary and "big = torch.ones" in summary
    del small, later


def test_source_skips_torch_frames_to_the_calling_line() -> None:
    layer = torch.nn.Linear(16, 32)
    with MemoryTracker() as tracker:
        line = _next_line()
        out = layer(torch.zeros(4, 16))
    ops = {a.op: a for a in tracker.ledger.live_allocations()}
    linear = ops["aten.addmm.default"]
    assert linear.source is not None and linear.source.line == line
    del out


def test_regions_name_timeline_points_and_keep_their_own_peaks() -> None:
    with MemoryTracker(Ledger(record_timeline=True)) as tracker:
        with tracker.ledger.region("profile_run") as profile:
            tmp = torch.empty(1000)
            del tmp
        kept = torch.empty(10)
        for i in range(2):
            with tracker.ledger.region(f"step {i}"):
                tmp = torch.empty(100 * (i + 1))
                del tmp
    assert profile.peak_bytes == 4000 and profile.end_bytes == 0
    step1 = tracker.ledger.region_stats("step 1")
    assert (step1.start_bytes, step1.peak_bytes) == (40, 840)
    assert tracker.ledger.peak_region == "profile_run"
    assert [p.region for p in tracker.ledger.timeline] == [
        "profile_run",
        "profile_run",
        None,
        "step 0",
        "step 0",
        "step 1",
        "step 1",
    ]
    assert [r.name for r in tracker.ledger.regions] == ["profile_run", "step 0", "step 1"]
    assert tracker.ledger.live_allocations()[0].region is None
    with pytest.raises(KeyError):
        tracker.ledger.region_stats("step 2")
    del kept


def test_reset_peak_starts_from_current() -> None:
    with MemoryTracker() as tracker:
        a = torch.empty(1000)
        del a
        tracker.ledger.reset_peak()
        b = torch.empty(10)
    assert tracker.ledger.peak_bytes == 40
    assert [x.nbytes for x in tracker.ledger.peak_allocations()] == [40]
    del b


def test_account_existing_counts_weights_once_as_a_baseline() -> None:
    model = torch.nn.Linear(8, 4)
    shared = torch.ones(5)
    tracker = MemoryTracker()
    added = tracker.account_existing([*model.parameters(), shared, shared[1:]], "weights")
    assert added == (8 * 4 + 4 + 5) * F32
    assert tracker.account_existing(model.parameters(), "weights") == 0
    with tracker, torch.no_grad():
        y = model(torch.zeros(2, 8))
    assert tracker.ledger.current_bytes == added + 2 * 4 * F32
    assert tracker.ledger.peak_bytes == added + 2 * 8 * F32 + 2 * 4 * F32
    labels = {a.op for a in tracker.ledger.live_allocations()}
    assert "weights" in labels
    del y


class _RefuseBig:
    """A capacity policy that refuses anything over 1000 bytes and logs every free."""

    def __init__(self) -> None:
        self.refused: list[Allocation] = []
        self.freed: list[int] = []

    def block_bytes(self, nbytes: int) -> int:
        return nbytes

    def allocate(self, allocation: Allocation, allocated_bytes: int) -> None:
        if allocation.nbytes > 1000:
            self.refused.append(allocation)
            raise MemoryError(f"refused {allocation.nbytes} with {allocated_bytes} live")

    def free(self, allocation: Allocation) -> None:
        self.freed.append(allocation.nbytes)


def test_a_capacity_policy_can_refuse_and_the_tracker_stays_consistent() -> None:
    policy = _RefuseBig()
    with MemoryTracker(Ledger(capacity=policy)) as tracker:
        ok = torch.empty(10)
        with pytest.raises(MemoryError, match="refused 4000 with 40 live"):
            torch.empty(1000)
        also_ok = torch.empty(20)
    assert tracker.ledger.current_bytes == 120
    assert tracker.ledger.peak_bytes == 120
    assert policy.refused[0].op == "aten.empty.memory_format"
    del ok, also_ok
    assert tracker.ledger.current_bytes == 0
    assert sorted(policy.freed) == [40, 80]


def test_exception_inside_the_block_leaves_a_consistent_tracker() -> None:
    tracker = MemoryTracker()
    with pytest.raises(ValueError, match="boom"), tracker, tracker.ledger.region("failing"):
        t = torch.empty(100)
        raise ValueError("boom")
    assert tracker.ledger.region_stats("failing").end_bytes == 400
    assert tracker.ledger.current_bytes == 400
    del t
    assert tracker.ledger.current_bytes == 0
    # the mode is off again: new tensors are not tracked, and the tracker can be reused
    untracked = torch.empty(100)
    assert tracker.ledger.current_bytes == 0
    with tracker:
        again = torch.empty(2)
    assert tracker.ledger.current_bytes == 8
    del untracked, again


def test_failing_op_is_not_accounted() -> None:
    with MemoryTracker() as tracker:
        with pytest.raises(RuntimeError):
            torch.ones(3) @ torch.ones(4)
        kept = torch.empty(1)
    assert tracker.ledger.current_bytes == 4 and tracker.ledger.num_allocations == 3
    del kept


def test_no_timeline_unless_asked() -> None:
    with MemoryTracker() as tracker:
        a = torch.empty(4)
    assert tracker.ledger.timeline == [] and tracker.ledger.peak_bytes == 16
    del a


def test_to_dict_is_json_ready() -> None:
    with MemoryTracker() as tracker:
        a = torch.empty(2, 3, dtype=torch.float16)
    record = tracker.ledger.peak_allocations()[0].to_dict()
    assert record["op"] == "aten.empty.memory_format"
    assert (record["nbytes"], record["shape"], record["dtype"]) == (12, [2, 3], "float16")
    assert record["source"].endswith(f"test_tracker.py:{record['source'].rsplit(':')[-1]}")
    assert record["line_text"] == "a = torch.empty(2, 3, dtype=torch.float16)"
    del a


def test_storage_less_outputs_are_ignored() -> None:
    indices = torch.tensor([[0, 1], [1, 0]])
    with MemoryTracker() as tracker:
        sparse = torch.sparse_coo_tensor(indices, torch.ones(2), (2, 2), check_invariants=True)
        dense = sparse.to_dense()
    # the dense result and the sparse parts' plain tensors
    assert tracker.ledger.current_bytes >= 16
    assert dense.sum().item() == 2


def test_tensors_freed_by_the_garbage_collector_are_observed() -> None:
    class Cycle:
        tensor: torch.Tensor
        me: object

    with MemoryTracker() as tracker:
        cycle = Cycle()
        cycle.me = cycle
        cycle.tensor = torch.empty(100)
        del cycle
        assert tracker.ledger.current_bytes == 400  # unreachable but not collected yet
        gc.collect()
        assert tracker.ledger.current_bytes == 0
        kept = torch.empty(1)
    assert [a.nbytes for a in tracker.ledger.live_allocations()] == [4]
    del kept
