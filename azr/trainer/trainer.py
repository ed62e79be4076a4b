"""One training step: experiences in, an updated and published policy out (DESIGN step 7).

For a batch of N experiences (AZR: 6 sub-batches, role x task type, of B each):

1. collate into right-padded tensors (``azr.trainer.batch``);
2. score the batch before any update: the old log-probs of the PPO ratio (by default the rollout engine's
   behaviour log-probs; or recomputed here, as veRL does) and, when the KL is on, the reference log-probs;
3. advantages over the whole batch with the configured estimator (TRR++: whitened per (role, type) group);
4. PPO epochs x mini-batches x micro-batches: each micro-batch loss is a token-mean over the response
   tokens of its whole mini-batch, so the accumulated gradient is exactly that of the mini-batch, and one
   optimizer step is taken per mini-batch;
5. policy version + 1.

Publishing the new weights and checkpointing are separate calls (``publish``, ``save_checkpoint_if_due``):
the learner owns their order (train -> acknowledge the batch -> publish -> checkpoint, DESIGN step 8), so a
crash between two of them never leaves published weights for a batch that will be trained again.
"""

from __future__ import annotations

import logging
import math
import resource
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch import Tensor

from azr.core.experience import Experience
from azr.trainer.algorithms import compute_advantages
from azr.trainer.batch import Batch, collate, micro_batches, mini_batches
from azr.trainer.checkpoint import TrainerState, load_checkpoint, save_checkpoint
from azr.trainer.config import TrainerConfig
from azr.trainer.engines import make_engine
from azr.trainer.logprobs import sequence_logprobs
from azr.trainer.losses import kl_estimate, policy_loss
from azr.trainer.models import load_reference, load_tokenizer, resolve_device, resolve_dtype
from azr.trainer.weights import Publisher, WeightSnapshot

log = logging.getLogger(__name__)

Scorer = Callable[[Tensor, Tensor], Tensor]
"""(input_ids, attention_mask) -> (N, L) log-probs, no gradient."""


class Trainer:
    """Owns the engine (model + optimizer), the training position and the weight publisher."""

    def __init__(self, cfg: TrainerConfig, *, publisher: Publisher | None = None) -> None:
        self.cfg = cfg
        self.device = resolve_device(cfg.device)
        self.compute_dtype = resolve_dtype(cfg.dtype, self.device)
        self.engine = make_engine(cfg, self.device, self.compute_dtype)
        self.reference = (
            load_reference(cfg.model, dtype=self.compute_dtype, device=self.device)
            if cfg.algo.loss.kl_coef > 0
            else None
        )
        self.publisher = publisher
        self.state = TrainerState()
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self.tokenizer = load_tokenizer(cfg.model)
        self.pad_token_id = int(self.tokenizer.pad_token_id)

    # -- the step ---------------------------------------------------------------------------------------

    def train_step(self, experiences: Sequence[Experience]) -> dict[str, float]:
        """Train on one batch; returns the step's metrics (namespaced, e.g. ``losses/pg_loss``)."""
        start = time.perf_counter()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        staleness = [self.state.policy_version - e.policy_version for e in experiences]
        batch, metrics = self._prepare(self._collate(experiences))
        metrics |= self._optimize(batch)
        metrics |= {
            "batch/staleness_mean": sum(staleness) / len(staleness),
            "batch/staleness_max": float(max(staleness)),
        }
        self.state.step += 1
        self.state.policy_version += 1
        self.state.consumed_experiences += batch.num_rows
        metrics |= self._bookkeeping(batch, time.perf_counter() - start)
        return metrics

    def _collate(self, experiences: Sequence[Experience]) -> Batch:
        batch = collate(experiences, self.pad_token_id)
        limit = getattr(self.engine.module.config, "max_position_embeddings", None)
        if isinstance(limit, int) and int(batch.lengths.max()) > limit:
            raise ValueError(
                f"an experience has {int(batch.lengths.max())} prompt + response tokens but the model takes "
                f"at most {limit}: cap the rollouts' prompt and response lengths"
            )
        return batch.to(self.device)

    def _prepare(self, batch: Batch) -> tuple[Batch, dict[str, float]]:
        """Old and reference log-probs and advantages, all computed before the first update."""
        metrics: dict[str, float] = {}
        old = batch.behaviour_logprobs
        if self.cfg.old_logprobs == "recompute":
            old = self._score(batch, self._policy_scorer)
            metrics |= mismatch_metrics(old, batch.behaviour_logprobs, batch.response_mask)
        ref = None if self.reference is None else self._score(batch, self._reference_scorer)
        kl = None
        if ref is not None and self.cfg.algo.kl_in_reward:
            kl = kl_estimate(old, ref, self.cfg.algo.loss.kl_estimator) * batch.response_mask  # (N, L)
        advantages = compute_advantages(
            self.cfg.algo,
            batch.rewards,
            batch.response_mask,
            role_type_groups=batch.groups,
            prompt_groups=batch.prompt_groups,
            kl=kl,
        )  # (N, L)
        batch = batch.with_(old_logprobs=old, ref_logprobs=ref, advantages=advantages)
        return batch, metrics | group_metrics(batch)

    def _optimize(self, batch: Batch) -> dict[str, float]:
        """PPO epochs x mini-batches, one optimizer step each; metrics averaged over the steps."""
        per_step: list[dict[str, float]] = []
        first = True
        for _ in range(self.cfg.ppo_epochs):
            shuffle = self.generator if self.cfg.shuffle else None
            for rows in mini_batches(batch.num_rows, self.cfg.mini_batch_size, shuffle):
                step_metrics = self._mini_batch_step(batch.select(rows))
                if first and self.cfg.old_logprobs == "behaviour":
                    # Before the first update the trainer's log-probs are the current policy's.
                    metrics = {k: v for k, v in step_metrics.items() if k.startswith("policy/logprob_")}
                    per_step.append({"mismatch/" + k.removeprefix("policy/"): v for k, v in metrics.items()})
                first = False
                per_step.append(step_metrics)
                self.state.optimizer_steps += 1
        return mean_over_steps(per_step)

    def _mini_batch_step(self, mini: Batch) -> dict[str, float]:
        """Accumulate the micro-batch gradients of one mini-batch and take one optimizer step."""
        token_count = float(mini.response_tokens)
        micro = micro_batches(
            range(mini.num_rows),
            mini.lengths,
            max_rows=self.cfg.micro_batch_size,
            max_tokens=self.cfg.micro_batch_max_tokens,
        )
        loss_cfg = self.cfg.algo.loss
        parts: list[dict[str, float]] = []
        total = 0.0
        for i, rows in enumerate(micro):
            mb = mini.select(rows)
            assert mb.old_logprobs is not None and mb.advantages is not None, "prepare the batch first"
            self.engine.begin_micro_batch(last=i == len(micro) - 1)
            logprobs, entropy = self.engine.forward_logprobs(
                mb.input_ids,
                mb.attention_mask,
                temperature=self.cfg.temperature,
                with_entropy=loss_cfg.entropy_coef > 0,
            )  # (n, l)
            out = policy_loss(
                logprobs,
                mb.old_logprobs,
                mb.advantages,
                mb.response_mask,
                loss_cfg,
                token_count=token_count,
                entropy=entropy,
                ref_logprobs=mb.ref_logprobs,
            )
            self.engine.backward(out.loss)
            total += float(out.loss.detach())
            parts.append(out.metrics)
        lr = self.engine.lr
        grad_norm = self.engine.step()
        return combine_micro_metrics(parts) | {
            "losses/loss": total,
            "optim/grad_norm": grad_norm,
            "optim/lr": lr,
            "optim/micro_batches": float(len(micro)),
        }

    # -- scoring ----------------------------------------------------------------------------------------

    @torch.no_grad()
    def _score(self, batch: Batch, scorer: Scorer) -> Tensor:
        """(N, L) log-probs of the whole batch, micro-batch by micro-batch, without gradients."""
        out = torch.zeros_like(batch.response_mask)  # (N, L)
        groups = micro_batches(
            range(batch.num_rows),
            batch.lengths,
            max_rows=self.cfg.micro_batch_size,
            max_tokens=self.cfg.micro_batch_max_tokens,
        )
        for rows in groups:
            mb = batch.select(rows)
            out[rows, : mb.input_ids.shape[1]] = scorer(mb.input_ids, mb.attention_mask)
        return out

    def _policy_scorer(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        logprobs, _ = self.engine.forward_logprobs(
            input_ids, attention_mask, temperature=self.cfg.temperature, with_entropy=False
        )
        return logprobs

    def _reference_scorer(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        assert self.reference is not None
        logprobs, _ = sequence_logprobs(
            self.reference, input_ids, attention_mask, temperature=self.cfg.temperature, with_entropy=False
        )
        return logprobs

    # -- publishing and checkpoints ---------------------------------------------------------------------

    def publish(self) -> WeightSnapshot:
        """Hand the current weights, tagged with the policy version, to the publisher."""
        if self.publisher is None:
            raise RuntimeError("this Trainer has no publisher: pass publisher= to publish weights")
        weights = self.engine.state_dict_for_publishing(self.compute_dtype)
        return self.publisher.publish(self.state.policy_version, weights)

    def save_checkpoint_if_due(self) -> Path | None:
        """Checkpoint every ``checkpoint_interval`` training steps (with ``checkpoint_dir`` set)."""
        if self.cfg.checkpoint_dir is None or self.state.step % self.cfg.checkpoint_interval != 0:
            return None
        return self.save_checkpoint(self.cfg.checkpoint_dir)

    def save_checkpoint(self, root: Path) -> Path:
        path = save_checkpoint(
            root,
            self.engine,
            self.state,
            self.generator,
            keep=self.cfg.keep_checkpoints,
            tokenizer=self.tokenizer,
        )
        log.info("saved checkpoint %s", path)
        return path

    def resume(self, directory: Path) -> None:
        """Continue from a checkpoint written by ``save_checkpoint`` (with the same config)."""
        self.state = load_checkpoint(directory, self.engine, self.generator)
        log.info("resumed from %s at step %d", directory, self.state.step)

    def _bookkeeping(self, batch: Batch, elapsed_s: float) -> dict[str, float]:
        tokens = float(batch.attention_mask.sum())
        return {
            "perf/step_s": elapsed_s,
            "perf/tokens_per_s": tokens / elapsed_s,
            "perf/peak_memory_bytes": float(peak_memory_bytes(self.device)),
            "batch/size": float(batch.num_rows),
            "batch/response_tokens": float(batch.response_tokens),
            "batch/response_len_mean": float(batch.response_mask.sum(1).mean()),
            "batch/seq_len_mean": float(batch.lengths.float().mean()),
            "trainer/step": float(self.state.step),
            "trainer/policy_version": float(self.state.policy_version),
            "trainer/optimizer_steps": float(self.state.optimizer_steps),
        }


# -- metrics helpers ------------------------------------------------------------------------------------


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
def group_metrics(batch: Batch) -> dict[str, float]:
    """Reward and advantage statistics per (role, task type) group, and over the batch."""
    assert batch.advantages is not None
    out = {"rewards/mean": float(batch.rewards.mean())}
    rows: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, g in enumerate(batch.groups):
        rows[g].append(i)
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
