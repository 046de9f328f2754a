"""The FlashInfer differential's stand-in for vLLM 0.34.0's page-index Triton kernel."""

from __future__ import annotations

import torch

from harness.fidelity.differentials.flashinfer import copy_page_indices


def test_the_page_index_copy_is_vllms_kernel_loop() -> None:
    # vLLM 0.34.0's _copy_page_indices_kernel: program i copies row i's first
    # cu[i + 1] - cu[i] block ids to page_indices[cu[i]:cu[i + 1]], whatever the tile width.
    table = torch.tensor([[7, 8, 9, 0], [3, 0, 0, 0], [4, 5, 0, 0]], dtype=torch.int32)
    cu = torch.tensor([0, 3, 4, 5], dtype=torch.int32)  # row 2 has 1 of its 2 blocks in use
    pages = torch.full((6,), -1, dtype=torch.int32)
    copy_page_indices((3,))(pages, table, table.stride(0), cu, BLOCK_SIZE=2)
    assert pages.tolist() == [7, 8, 9, 3, 4, -1]
    strided = torch.zeros((3, 8), dtype=torch.int32)[:, :4]  # a view wider than its rows
    strided.copy_(table)
    again = torch.full((6,), -1, dtype=torch.int32)
    copy_page_indices((3,))(again, strided, strided.stride(0), cu, BLOCK_SIZE=1024)
    assert again.tolist() == pages.tolist()
