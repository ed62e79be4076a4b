"""One training step: experiences in, an updated policy out (DESIGN step 7), read top to bottom.

For a batch of N experiences (AZR: 6 sub-batches, role x task type, of B each), on each rank:

1. ``_collate``: this rank's experiences into right-padded tensors (``azr.trainer.batch``); a non-finite
   reward or an over-long sequence refuses the whole step before anything changes;
2. ``_prepare``: before any update, the old log-probs of the PPO ratio (by default recomputed here, as
   veRL does), the truncated importance weights against the sampler's log-probs (when enabled), the
   reference log-probs (when the KL is on), and the advantages over the *global* batch's sampled rows
   (TRR++: whitened per (role, type) group, with the groups' statistics taken over all ranks);
3. ``_optimize``: PPO epochs x mini-batches x micro-batches, one mini-batch per ``mini_batch_size``
   responses. Sampled rows and demonstrations (when the batch holds any) are each shared out evenly over
   the mini-batches, so that every optimizer step both reinforces and imitates. Each micro-batch loss is
   a token-mean over the sampled (for the imitation term: the demonstration) tokens of its whole
   mini-batch on all ranks, so the accumulated and rank-averaged gradient is exactly that of the
   mini-batch, and one optimizer step is taken per mini-batch. Every rank runs the same number of mini-
   and micro-batches (fillers that carry no tokens make up the difference);
4. policy version + 1.

The math lives in ``advantages`` / ``algorithms`` (estimators), ``losses`` (the PPO objective) and
``logprobs`` (scoring); the engines own parameters and optimizer; ``metrics`` does the reporting.

Publishing the new weights and checkpointing are separate calls (``publish``, ``save_checkpoint_if_due``):
the learner owns their order (train -> acknowledge the batch -> publish -> checkpoint, DESIGN step 8), so a
crash between two of them never leaves published weights for a batch that will be trained again. Both
are collective over ranks; rank 0 alone writes.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch import Tensor

from azr.core.experience import Experience
from azr.trainer import distributed as ranks
from azr.trainer.algorithms import compute_advantages
from azr.trainer.batch import TrainingBatch, collate, micro_batches, mini_batches
from azr.trainer.checkpoint import TrainerState, load_checkpoint, save_checkpoint
from azr.trainer.config import TrainerConfig
from azr.trainer.engines import make_engine
from azr.trainer.logprobs import sequence_logprobs
from azr.trainer.losses import imitation_loss, kl_estimate, policy_loss
from azr.trainer.metrics import (
    combine_micro_metrics,
    group_metrics,
    mean_over_steps,
    mismatch_metrics,
    peak_memory_bytes,
)
from azr.trainer.models import load_reference, load_tokenizer, resolve_device, resolve_dtype
from azr.trainer.weights import InMemoryPublisher, Publisher, WeightSnapshot

log = logging.getLogger(__name__)

Scorer = Callable[[TrainingBatch], Tensor]
"""A micro-batch -> its (n, l) log-probs on response tokens, no gradient."""


class Trainer:
    """Owns the engine (model + optimizer), the training position and the weight publisher."""

    def __init__(self, cfg: TrainerConfig, *, publisher: Publisher | None = None) -> None:
        self.cfg = cfg
        self.device = resolve_device(cfg.device)
        self.compute_dtype = resolve_dtype(cfg.dtype, self.device)
        self.engine = make_engine(cfg, self.device, self.compute_dtype)
        if ranks.world_size() > 1 and isinstance(publisher, InMemoryPublisher):
            raise ValueError("an InMemoryPublisher serves one process: use a DirectoryPublisher with ranks")
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

    def check_sampler_temperature(self, temperature: float) -> None:
        """Refuse a sampler whose log-probs were taken at another temperature than the trainer scores at.

        The behaviour log-probs are those of softmax(z / T) at the sampler's T; scored at another T, the
        same tokens get other log-probs, the mismatch metric and any importance weight are wrong, and
        the learnability rollouts no longer sample the distribution being trained.
        """
        if not math.isclose(temperature, self.cfg.temperature, rel_tol=1e-6):
            raise ValueError(
                f"the sampler draws at temperature {temperature} but the trainer scores log-probs at "
                f"{self.cfg.temperature}: set TrainerConfig.temperature to the sampler's temperature "
                "(the paper trains and samples at 1.0)"
            )

    # -- the step ---------------------------------------------------------------------------------------

    def train_step(self, experiences: Sequence[Experience]) -> dict[str, float]:
        """Train on one batch; returns the step's metrics (namespaced, e.g. ``losses/pg_loss``).

        With several ranks each passes its own share of the batch (``azr.trainer.batch.shard``); every
        rank must call it, with at least one experience.
        """
        start = time.perf_counter()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        batch = self._collate(experiences)  # 1
        batch, metrics = self._prepare(batch)  # 2
        metrics |= self._optimize(batch)  # 3
        staleness = [self.state.policy_version - e.policy_version for e in experiences]
        self.state.step += 1  # 4
        self.state.policy_version += 1
        self.state.consumed_experiences += int(ranks.sum_over_ranks(batch.num_rows))
        metrics |= {
            "batch/staleness_mean": sum(staleness) / len(staleness),
            "batch/staleness_max": float(max(staleness)),
        }
        return metrics | self._bookkeeping(batch, time.perf_counter() - start)

    def _collate(self, experiences: Sequence[Experience]) -> TrainingBatch:
        batch = collate(experiences, self.pad_token_id)
        limit = getattr(self.engine.module.config, "max_position_embeddings", None)
        if isinstance(limit, int) and int(batch.lengths.max()) > limit:
            raise ValueError(
                f"an experience has {int(batch.lengths.max())} prompt + response tokens but the model takes "
                f"at most {limit}: cap the rollouts' prompt and response lengths"
            )
        return batch.to(self.device)

    def _prepare(self, batch: TrainingBatch) -> tuple[TrainingBatch, dict[str, float]]:
        """Old and reference log-probs, importance weights and advantages, all before the first update."""
        metrics: dict[str, float] = {}
        loss_cfg = self.cfg.algo.loss
        old, is_weights = batch.behaviour_logprobs, None  # (N, L)
        if self.cfg.old_logprobs == "recompute":
            old = self._score(batch, self._policy_scorer)
            if batch.sampled_tokens > 0:  # a demonstration's behaviour log-probs are not a sampler's
                metrics |= mismatch_metrics(old, batch.behaviour_logprobs, batch.sampled_mask)
            if loss_cfg.tis_cap is not None:
                log_w = (old - batch.behaviour_logprobs) * batch.response_mask  # (N, L) log pi_old / pi_b
                is_weights = log_w.exp().clamp(max=loss_cfg.tis_cap)  # (N, L)
        ref = None if self.reference is None else self._score(batch, self._reference_scorer)
        kl = None
        if ref is not None and self.cfg.algo.kl_in_reward:
            kl = kl_estimate(old, ref, loss_cfg.kl_estimator) * batch.response_mask  # (N, L)
        advantages = self._advantages(batch, kl)  # (N, L)
        batch = batch.with_(old_logprobs=old, ref_logprobs=ref, advantages=advantages, is_weights=is_weights)
        return batch, metrics | group_metrics(batch)

    def _advantages(self, batch: TrainingBatch, kl: Tensor | None) -> Tensor:
        """(N, L) advantages of this rank's sampled rows, computed over the sampled rows of all ranks;
        0 on demonstrations, which are imitated and never enter a baseline.

        Each rank gathers every rank's rewards, group labels, response masks (and token KL), computes the
        advantages of the global batch the way one process would, and keeps its own rows: TRR++'s
        per-group mean and deviation, and GRPO's per-prompt ones, are those of the whole batch.
        """
        rows = batch.rows(demonstration=False)
        index = torch.as_tensor(rows, dtype=torch.long, device=batch.rewards.device)
        mine = (
            batch.rewards[index].cpu(),
            batch.response_mask[index].cpu(),
            [batch.groups[i] for i in rows],
            [batch.prompt_groups[i] for i in rows],
            None if kl is None else kl[index].cpu(),
        )
        parts = ranks.gather_objects(mine)
        out = torch.zeros_like(batch.response_mask)  # (N, L)
        if sum(len(p[2]) for p in parts) == 0:
            return out
        width = max(p[1].shape[1] for p in parts)

        def cat(i: int) -> Tensor:
            return torch.cat([torch.nn.functional.pad(p[i], (0, width - p[i].shape[1])) for p in parts])

        advantages = compute_advantages(
            self.cfg.algo,
            torch.cat([p[0] for p in parts]),
            cat(1),
            role_type_groups=[g for p in parts for g in p[2]],
            prompt_groups=[g for p in parts for g in p[3]],
            kl=None if kl is None else cat(4),
        )  # (N_all, L_all)
        first = sum(p[0].shape[0] for p in parts[: ranks.rank()])
        out[index] = advantages[first : first + len(rows), : out.shape[1]].to(out)  # (n_sampled, L)
        return out

    def _optimize(self, batch: TrainingBatch) -> dict[str, float]:
        """PPO epochs x mini-batches, one optimizer step each; metrics averaged over the steps."""
        sampled, demonstrations = batch.rows(demonstration=False), batch.rows(demonstration=True)
        count = math.ceil(ranks.sum_over_ranks(batch.num_rows) / self.cfg.mini_batch_size)
        per_step: list[dict[str, float]] = []
        first = True
        for _ in range(self.cfg.ppo_epochs):
            shuffle = self.generator if self.cfg.shuffle else None
            cuts = zip(
                mini_batches(sampled, count, shuffle),
                mini_batches(demonstrations, count, shuffle),
                strict=True,
            )
            for rows in (s + d for s, d in cuts):
                step_metrics = self._mini_batch_step(batch, rows)
                if step_metrics is None:  # no rank holds a row of this mini-batch
                    continue
                if first and self.cfg.old_logprobs == "behaviour":
                    # Before the first update the trainer's log-probs are the current policy's.
                    metrics = {k: v for k, v in step_metrics.items() if k.startswith("policy/logprob_")}
                    per_step.append({"mismatch/" + k.removeprefix("policy/"): v for k, v in metrics.items()})
                first = False
                per_step.append(step_metrics)
                self.state.optimizer_steps += 1
        return mean_over_steps(per_step)

    def _mini_batch_step(self, batch: TrainingBatch, rows: list[int]) -> dict[str, float] | None:
        """Accumulate the micro-batch gradients of one mini-batch and take one optimizer step.

        The policy loss of each micro-batch is divided by (sampled tokens of the mini-batch on all ranks)
        / W, and its imitation loss by (demonstration tokens of the mini-batch on all ranks) / W: the
        engines average gradients over the W ranks, which makes the sum over ranks exact.
        """
        mini = batch.select(rows) if rows else None
        world = ranks.world_size()
        token_count = ranks.sum_over_ranks(0.0 if mini is None else mini.sampled_tokens) / world
        demo_count = ranks.sum_over_ranks(0.0 if mini is None else mini.demonstration_tokens) / world
        if token_count == 0 and demo_count == 0:
            return None
        micro = self._micro_batches(mini)
        count = ranks.max_over_ranks(len(micro))
        filler = batch.select([0]).without_tokens()
        loss_cfg = self.cfg.algo.loss
        parts: list[dict[str, float]] = []
        total = imitation_total = 0.0
        for i in range(count):
            mb = mini.select(micro[i]) if mini is not None and i < len(micro) else filler
            assert mb.old_logprobs is not None and mb.advantages is not None, "prepare the batch first"
            self.engine.begin_micro_batch(last=i == count - 1)
            logprobs, entropy = self.engine.forward_logprobs(
                mb.input_ids,
                mb.attention_mask,
                temperature=self.cfg.temperature,
                with_entropy=loss_cfg.entropy_coef > 0,
                score_mask=mb.response_mask if self.cfg.response_only_lm_head else None,
            )  # (n, l)
            loss = torch.zeros((), device=logprobs.device)
            if token_count > 0:
                out = policy_loss(
                    logprobs,
                    mb.old_logprobs,
                    mb.advantages,
                    mb.sampled_mask,
                    loss_cfg,
                    token_count=token_count,
                    entropy=entropy,
                    ref_logprobs=mb.ref_logprobs,
                    is_weights=mb.is_weights,
                )
                loss = out.loss
                if mb.sampled_tokens > 0:
                    parts.append(out.metrics)
            if demo_count > 0:
                nll = imitation_loss(logprobs, mb.demonstration_mask, token_count=demo_count)
                loss = loss + loss_cfg.imitation_coef * nll
                imitation_total += float(nll.detach())
            self.engine.backward(loss)
            total += float(loss.detach())
        lr = self.engine.lr
        grad_norm = self.engine.step()
        local = combine_micro_metrics(parts) if parts else {}
        if demo_count > 0:
            local["losses/imitation_nll"] = ranks.sum_over_ranks(imitation_total) / world
        return local | {
            "losses/loss": ranks.sum_over_ranks(total) / world,
            "optim/grad_norm": grad_norm,
            "optim/lr": lr,
            "optim/micro_batches": float(count),
        }

    def _micro_batches(
        self, mini: TrainingBatch | None, rows: Sequence[int] | None = None
    ) -> list[list[int]]:
        """``rows`` of ``mini`` (all of them by default) packed into micro-batches."""
        if mini is None:
            return []
        rows = range(mini.num_rows) if rows is None else rows
        if not rows:
            return []
        return micro_batches(
            rows, mini.lengths, max_rows=self.cfg.micro_batch_size, max_tokens=self.cfg.micro_batch_max_tokens
        )

    # -- scoring ----------------------------------------------------------------------------------------

    @torch.no_grad()
    def _score(self, batch: TrainingBatch, scorer: Scorer) -> Tensor:
        """(N, L) log-probs of the sampled rows' response tokens, micro-batch by micro-batch, without
        gradients; 0 on demonstrations, whose loss needs neither old nor reference log-probs.

        Every rank runs the same number of forward passes: ZeRO-3 gathers weights collectively in each.
        """
        out = torch.zeros_like(batch.response_mask)  # (N, L)
        groups = self._micro_batches(batch, batch.rows(demonstration=False))
        filler = batch.select([0]).without_tokens()
        for i in range(ranks.max_over_ranks(len(groups))):
            if i >= len(groups):
                scorer(filler)
                continue
            mb = batch.select(groups[i])
            out[groups[i], : mb.input_ids.shape[1]] = scorer(mb)
        return out * batch.sampled_mask

    def _policy_scorer(self, mb: TrainingBatch) -> Tensor:
        logprobs, _ = self.engine.forward_logprobs(
            mb.input_ids,
            mb.attention_mask,
            temperature=self.cfg.temperature,
            with_entropy=False,
            score_mask=mb.response_mask if self.cfg.response_only_lm_head else None,
        )
        return logprobs

    def _reference_scorer(self, mb: TrainingBatch) -> Tensor:
        assert self.reference is not None
        logprobs, _ = sequence_logprobs(
            self.reference,
            mb.input_ids,
            mb.attention_mask,
            temperature=self.cfg.temperature,
            with_entropy=False,
            score_mask=mb.response_mask if self.cfg.response_only_lm_head else None,
        )
        return logprobs

    # -- publishing and checkpoints ---------------------------------------------------------------------

    def publish(self) -> WeightSnapshot:
        """Hand the current weights, tagged with the policy version, to the publisher (rank 0 writes).

        Every rank must call it. With several ranks the others get rank 0's snapshot (a file).
        """
        if self.publisher is None:
            raise RuntimeError("this Trainer has no publisher: pass publisher= to publish weights")
        weights = self.engine.state_dict_for_publishing(self.compute_dtype)
        snapshot = self.publisher.publish(self.state.policy_version, weights) if ranks.is_main() else None
        ranks.barrier()
        if ranks.world_size() == 1:
            assert snapshot is not None
            return snapshot
        path = ranks.broadcast_object(None if snapshot is None else snapshot.path)
        return snapshot or WeightSnapshot(version=self.state.policy_version, path=path)

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

    def _bookkeeping(self, batch: TrainingBatch, elapsed_s: float) -> dict[str, float]:
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
            "trainer/ranks": float(ranks.world_size()),
        }
