"""The numbers a training step reports, computed apart from the step itself (namespaced like CleanRL)."""

from __future__ import annotations

import math
import resource
from collections import defaultdict
from collections.abc import Sequence

import torch
from torch import Tensor

from azr.trainer.batch import TrainingBatch


def peak_memory_bytes(device: torch.device) -> int:
    """Peak allocated CUDA memory since the step began, or on the CPU the process's peak RSS so far."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


@torch.no_grad()
def mismatch_metrics(trainer: Tensor, behaviour: Tensor, mask: Tensor) -> dict[str, float]:
    """How far the rollout engine's log-probs are from the trainer's on the same tokens, before updates."""
    m = mask.bool()  # (N, L)
    diff = (trainer - behaviour)[m]  # (tokens,)
    return {
        "mismatch/logprob_diff_mean": float(diff.mean()),
        "mismatch/logprob_absdiff_mean": float(diff.abs().mean()),
        "mismatch/logprob_absdiff_max": float(diff.abs().max()),
    }


@torch.no_grad()
def group_metrics(batch: TrainingBatch) -> dict[str, float]:
    """Reward and advantage statistics of the sampled rows, per (role, task type) group and over the
    batch, and the count of demonstrations (which have neither)."""
    assert batch.advantages is not None
    sampled = batch.rows(demonstration=False)
    out = {"batch/demonstrations": float(batch.num_rows - len(sampled))}
    if sampled:
        out["rewards/mean"] = float(batch.rewards[sampled].mean())
    rows: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i in sampled:
        rows[batch.groups[i]].append(i)
    for (role, task_type), index in sorted(rows.items()):
        r = batch.rewards[index]  # (n,)
        m = batch.response_mask[index].bool()  # (n, L)
        a = batch.advantages[index][m]  # (tokens,)
        prefix = f"{role}/{task_type}"
        out |= {
            f"rewards/{prefix}/mean": float(r.mean()),
            f"rewards/{prefix}/std": float(r.std(unbiased=False)),
            f"rewards/{prefix}/count": float(len(index)),
            f"advantages/{prefix}/mean": float(a.mean()),
            f"advantages/{prefix}/std": float(a.std(unbiased=False)),
            f"advantages/{prefix}/max": float(a.max()),
            f"advantages/{prefix}/min": float(a.min()),
        }
    return out


def combine_micro_metrics(parts: Sequence[dict[str, float]]) -> dict[str, float]:
    """Token-weighted means over micro-batches (their metrics are means over their own tokens).

    Names ending in ``_max``/``_min`` take the max/min, ``policy/tokens`` is summed.
    """
    weights = [p.get("policy/tokens", 1.0) for p in parts]
    out: dict[str, float] = {}
    for key in parts[0]:
        values = [p[key] for p in parts]
        if key.endswith("_max"):
            out[key] = max(values)
        elif key.endswith("_min"):
            out[key] = min(values)
        elif key == "policy/tokens":
            out[key] = sum(values)
        else:
            out[key] = sum(v * w for v, w in zip(values, weights, strict=True)) / sum(weights)
    return out


def mean_over_steps(per_step: Sequence[dict[str, float]]) -> dict[str, float]:
    """Average each metric over the optimizer steps of a training step (max/min for ``_max``/``_min``)."""
    keys = {k for s in per_step for k in s}
    out: dict[str, float] = {}
    for key in sorted(keys):
        values = [s[key] for s in per_step if key in s]
        if key.endswith("_max"):
            out[key] = max(values)
        elif key.endswith("_min"):
            out[key] = min(values)
        else:
            out[key] = math.fsum(values) / len(values)
    return out
