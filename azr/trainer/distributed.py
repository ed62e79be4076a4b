"""Data parallelism over ranks: who is rank 0, and the few collectives one training step needs.

The trainer runs the same code on every rank; each rank trains on its own shard of the batch
(``azr.trainer.batch.shard``). What must agree across ranks is agreed here:

- the advantages: TRR++ whitens within (role, task type) groups of the *global* batch, so the rewards,
  group labels and response masks of every rank are gathered (a few numbers per response) and each rank
  computes the same advantages for all, keeping its own rows;
- the token count of the token-mean: summed over ranks, then divided by the world size, because the
  engines average gradients over ranks;
- the number of mini-batches and of micro-batches: every rank takes the same number of optimizer steps and
  of backward passes, or a collective would wait forever.

Without a process group (one process) every helper is the identity, at no cost.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import torch
import torch.distributed as dist


def world_size() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def is_main() -> bool:
    """Rank 0: the one that writes checkpoints and publishes weights."""
    return rank() == 0


def launched_with_ranks() -> bool:
    """Whether a launcher (torchrun, deepspeed) started this process as one of several ranks."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def ensure_process_group(device: torch.device) -> None:
    """Join the launcher's process group, or create a single-rank one (gloo on the CPU, NCCL on CUDA)."""
    if dist.is_initialized():
        return
    defaults = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def barrier() -> None:
    if world_size() > 1:
        dist.barrier()


def sum_over_ranks(value: float) -> float:
    if world_size() == 1:
        return value
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return float(t.item())


def max_over_ranks(value: int) -> int:
    if world_size() == 1:
        return value
    t = torch.tensor([value], dtype=torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def gather_objects(obj: Any) -> list[Any]:
    """``obj`` of every rank, in rank order (pickled: keep it small)."""
    if world_size() == 1:
        return [obj]
    out: list[Any] = [None] * world_size()
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank."""
    if world_size() == 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]
