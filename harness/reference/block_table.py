"""Per-group block tables that own their group's slot mapping (``vllm/v1/worker/block_table.py``).

Row operations are vLLM 0.9.0's, a table per group with its own block size 0.9.1's, the table
computing its slot mapping 0.10.0's (``docs/fidelity.md``). Row ``i`` lists the blocks of the
request in batch slot ``i``; position ``pos`` maps to slot
``block_table[i, pos // block_size] * block_size + pos % block_size``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch

from harness.reference.kv_cache_interface import cdiv


class BlockTable:
    """One KV cache group's block table (CPU, numpy and device copies) and slot mapping."""

    def __init__(
        self,
        block_size: int,
        max_num_reqs: int,
        max_num_blocks_per_req: int,
        max_num_batched_tokens: int,
        pin_memory: bool,
        device: torch.device | str,
    ) -> None:
        self.block_size = block_size
        self.max_num_reqs = max_num_reqs
        self.max_num_blocks_per_req = max_num_blocks_per_req
        self.max_num_batched_tokens = max_num_batched_tokens
        self.pin_memory = pin_memory and torch.cuda.is_available()
        self.device = torch.device(device)

        shape = (max_num_reqs, max_num_blocks_per_req)
        self.block_table = torch.zeros(shape, dtype=torch.int32, device=self.device)
        """(max_num_reqs, max_num_blocks_per_req) int32 on the device: rows committed so far."""
        self.block_table_cpu = torch.zeros(shape, dtype=torch.int32, pin_memory=self.pin_memory)
        """(max_num_reqs, max_num_blocks_per_req) int32 on the CPU: the rows being edited."""
        self.block_table_np: npt.NDArray[np.int32] = self.block_table_cpu.numpy()
        """numpy view of ``block_table_cpu``."""
        self.num_blocks_per_row: npt.NDArray[np.int32] = np.zeros(max_num_reqs, dtype=np.int32)
        """(max_num_reqs,) int32: how many leading entries of each row are valid block ids."""

        self.slot_mapping_cpu = torch.zeros(
            max_num_batched_tokens, dtype=torch.int64, pin_memory=self.pin_memory
        )
        """(max_num_batched_tokens,) int64 on the CPU: KV cache slot of each scheduled token."""
        self.slot_mapping_np: npt.NDArray[np.int64] = self.slot_mapping_cpu.numpy()
        """numpy view of ``slot_mapping_cpu``."""
        self.slot_mapping = torch.zeros(
            max_num_batched_tokens, dtype=torch.int64, device=self.device
        )
        """(max_num_batched_tokens,) int64 on the device: committed slot mapping."""

    def append_row(self, block_ids: list[int], row_idx: int) -> None:
        if not block_ids:
            return
        start = int(self.num_blocks_per_row[row_idx])
        end = start + len(block_ids)
        if end > self.max_num_blocks_per_req:
            raise ValueError(
                f"row {row_idx} would hold {end} blocks; max_num_blocks_per_req is "
                f"{self.max_num_blocks_per_req}"
            )
        self.block_table_np[row_idx, start:end] = block_ids
        self.num_blocks_per_row[row_idx] = end

    def add_row(self, block_ids: list[int], row_idx: int) -> None:
        """Replace row ``row_idx`` with ``block_ids``."""
        self.num_blocks_per_row[row_idx] = 0
        self.append_row(block_ids, row_idx)

    def move_row(self, src: int, tgt: int) -> None:
        """Copy row ``src`` into row ``tgt`` (``src`` is left as it was)."""
        num_blocks = int(self.num_blocks_per_row[src])
        self.block_table_np[tgt, :num_blocks] = self.block_table_np[src, :num_blocks]
        self.num_blocks_per_row[tgt] = num_blocks

    def swap_row(self, src: int, tgt: int) -> None:
        self.num_blocks_per_row[[src, tgt]] = self.num_blocks_per_row[[tgt, src]]
        self.block_table_np[[src, tgt]] = self.block_table_np[[tgt, src]]

    def commit(self, num_reqs: int) -> None:
        """Copy the first ``num_reqs`` rows to the device."""
        self.block_table[:num_reqs].copy_(self.block_table_cpu[:num_reqs], non_blocking=True)

    def clear(self) -> None:
        """Zero every row on the CPU and the device; the row counts stay (as vLLM 0.9.0)."""
        self.block_table.fill_(0)
        self.block_table_cpu.fill_(0)

    def compute_slot_mapping(
        self, req_indices: npt.NDArray[np.integer], positions: npt.NDArray[np.integer]
    ) -> None:
        """Fill ``slot_mapping_np[:len(positions)]``: token ``t`` is at ``positions[t]`` of
        batch row ``req_indices[t]``. A position outside the row's blocks (a scheduler bug) raises.
        """
        num_tokens = positions.shape[0]
        if num_tokens > self.max_num_batched_tokens:
            raise ValueError(
                f"{num_tokens} tokens exceed max_num_batched_tokens={self.max_num_batched_tokens}"
            )
        block_idx = positions // self.block_size
        past_end = block_idx >= self.num_blocks_per_row[req_indices]
        if past_end.any():
            t = int(np.flatnonzero(past_end)[0])
            raise IndexError(
                f"token {t} (request row {int(req_indices[t])}, position {int(positions[t])}) has no "
                f"block: the row holds {int(self.num_blocks_per_row[req_indices[t]])} blocks of "
                f"{self.block_size} tokens"
            )
        block_numbers = self.block_table_np.ravel()[
            req_indices * self.max_num_blocks_per_req + block_idx
        ]
        np.add(
            block_numbers.astype(np.int64) * self.block_size,
            positions % self.block_size,
            out=self.slot_mapping_np[:num_tokens],
        )

    def commit_slot_mapping(self, num_tokens: int) -> None:
        """Copy the first ``num_tokens`` slots to the device ``slot_mapping``."""
        self.slot_mapping[:num_tokens].copy_(self.slot_mapping_cpu[:num_tokens], non_blocking=True)

    def get_device_tensor(self) -> torch.Tensor:
        return self.block_table

    def get_cpu_tensor(self) -> torch.Tensor:
        return self.block_table_cpu

    def get_numpy_array(self) -> npt.NDArray[np.int32]:
        return self.block_table_np


class MultiGroupBlockTable:
    """One ``BlockTable`` per KV cache group, each with its own block size; fans the row API out."""

    def __init__(
        self,
        max_num_reqs: int,
        max_model_len: int,
        max_num_batched_tokens: int,
        pin_memory: bool,
        device: torch.device | str,
        block_sizes: list[int],
    ) -> None:
        self.block_tables = [
            BlockTable(
                block_size,
                max_num_reqs,
                cdiv(max_model_len, block_size),
                max_num_batched_tokens,
                pin_memory,
                device,
            )
            for block_size in block_sizes
        ]

    def _check_groups(self, block_ids: list[list[int]]) -> None:
        if len(block_ids) != len(self.block_tables):
            raise ValueError(
                f"got block ids for {len(block_ids)} groups; there are {len(self.block_tables)}"
            )

    def append_row(self, block_ids: list[list[int]], row_idx: int) -> None:
        self._check_groups(block_ids)
        for block_table, ids in zip(self.block_tables, block_ids, strict=True):
            block_table.append_row(ids, row_idx)

    def add_row(self, block_ids: list[list[int]], row_idx: int) -> None:
        self._check_groups(block_ids)
        for block_table, ids in zip(self.block_tables, block_ids, strict=True):
            block_table.add_row(ids, row_idx)

    def move_row(self, src: int, tgt: int) -> None:
        for block_table in self.block_tables:
            block_table.move_row(src, tgt)

    def swap_row(self, src: int, tgt: int) -> None:
        for block_table in self.block_tables:
            block_table.swap_row(src, tgt)

    def compute_slot_mapping(
        self, req_indices: npt.NDArray[np.integer], positions: npt.NDArray[np.integer]
    ) -> None:
        """Each group's slot mapping, with that group's block size."""
        for block_table in self.block_tables:
            block_table.compute_slot_mapping(req_indices, positions)

    def commit(self, num_reqs: int) -> None:
        for block_table in self.block_tables:
            block_table.commit(num_reqs)

    def __getitem__(self, idx: int) -> BlockTable:
        """The block table of KV cache group ``idx``."""
        return self.block_tables[idx]
