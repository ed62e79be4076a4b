"""The learner: the only owner of the policy version, with a fixed order of work (DESIGN step 8).

One learner step:

1. take the step's experiences from the source (stale ones are dropped there and counted);
2. train, holding the experiences' lease (renewed in the background, confirmed before training):
   ``Trainer.train_step`` advances the policy version from v to v+1;
3. commit: acknowledge the experiences as trained (atomically with the trained-id ledger). A lease lost
   meanwhile (another learner took the experiences over) makes the commit refuse: the learner raises and
   dies with the step unpublished, and its restart resumes from the last checkpoint;
4. publish the weights as version v+1 and record the version;
5. checkpoint when due.

Why this order: a crash before 3 leaves the experiences unacknowledged, so they are delivered again and
trained by the restarted learner (whose weights come from the last checkpoint, from before they were
trained); a crash after 3 never trains them twice, because the ledger knows them. Publishing after the
commit means no rollout worker ever samples from weights whose batch could still be trained again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol, TypeVar

from azr.core.experience import Experience
from azr.trainer.checkpoint import latest_checkpoint
from azr.trainer.trainer import Trainer

log = logging.getLogger(__name__)

Lease = TypeVar("Lease")


class ExperienceSource(Protocol[Lease]):
    """Where the learner takes experiences from (the experience stream)."""

    def take(self, current_version: int, n: int) -> tuple[list[Experience], Lease]:
        """Up to n experiences no older than the staleness bound allows, and the lease that holds them;
        waits a short while when none is there yet."""
        ...

    def holding(self, leases: Sequence[Lease]) -> AbstractContextManager[object]:
        """Keep the leases alive while the block runs (a long training step)."""
        ...

    def confirm(self, leases: Sequence[Lease]) -> None:
        """Raise if this learner no longer holds the experiences (another consumer took them over)."""
        ...

    def commit(self, leases: Sequence[Lease]) -> None:
        """Acknowledge the experiences as trained; raise, recording nothing, if the leases were lost (the
        step must then die with the learner: its weights are never published)."""
        ...


class VersionRecord(Protocol):
    """Where the published policy version is recorded for everyone to read (the run state)."""

    def current(self) -> int: ...

    def advance(self, version: int) -> int:
        """Record ``version`` unless a higher one is recorded; returns the recorded version."""
        ...


TRAIN_KEYS = {
    "train/pg_loss": ("losses/pg_loss",),
    "train/entropy": ("losses/entropy",),
    "train/kl": ("losses/kl",),
    "train/imitation_nll": ("losses/imitation_nll",),
    "train/clip_frac": ("losses/clipfrac_low", "losses/clipfrac_high"),
    "train/grad_norm": ("optim/grad_norm",),
    "perf/tokens_per_s": ("perf/tokens_per_s",),
    "perf/train_s": ("perf/step_s",),
    "batch/staleness_max": ("batch/staleness_max",),
    "batch/size": ("batch/size",),
}
"""The loop's headline training metrics, each the sum of the trainer's metrics it names (0 when absent,
e.g. the KL when it is off)."""


class Learner:
    """Trains the policy on the experience source, one step per call, in the order above."""

    def __init__(
        self,
        trainer: Trainer,
        source: ExperienceSource[Lease],
        versions: VersionRecord,
        *,
        sampler_temperature: float,
    ) -> None:
        trainer.check_sampler_temperature(sampler_temperature)
        self.trainer = trainer
        self.source = source
        self.versions = versions
        self._idle_since = time.perf_counter()

    @property
    def policy_version(self) -> int:
        return self.trainer.state.policy_version

    @property
    def steps_done(self) -> int:
        return self.trainer.state.step

    def resume(self, checkpoint_root: Path) -> bool:
        """Continue from the newest checkpoint under ``checkpoint_root``, if there is one.

        The policy version never goes backwards. A checkpoint is written after its weights were published,
        so when no later version is recorded the restored weights are the published ones and keep their
        version. When later versions were published (and lost with the learner), the restored weights are
        published at once under a version above every recorded one, so no worker mistakes them for those.
        """
        checkpoint = latest_checkpoint(checkpoint_root)
        if checkpoint is not None:
            self.trainer.resume(checkpoint)
        recorded = self.versions.current()
        if checkpoint is None and recorded == 0:
            return False
        if recorded > self.trainer.state.policy_version or checkpoint is None:
            self.trainer.state.policy_version = recorded + 1
            self._publish()
        log.info(
            "learner resumed from %s at step %d with policy version %d",
            checkpoint,
            self.trainer.state.step,
            self.policy_version,
        )
        return True

    def publish_initial(self) -> None:
        """Publish the initial weights as version 0 when nothing is published yet, so that every rollout
        worker (a restarted one too) can load the policy from the same place."""
        if self.trainer.publisher is not None and self.trainer.publisher.latest() is None:
            self._publish()

    def step(self, expected: int) -> dict[str, float]:
        """Train on the next ``expected`` experiences (fewer if the source runs dry); no experience, no
        update."""
        idle_s = time.perf_counter() - self._idle_since
        start = time.perf_counter()
        experiences: list[Experience] = []
        leases = []
        while len(experiences) < expected:
            got, lease = self.source.take(self.policy_version, expected - len(experiences))
            if not got:
                break
            experiences += got
            leases.append(lease)
        read_s = time.perf_counter() - start
        if not experiences:
            self._idle_since = time.perf_counter()
            log.warning(
                "learner step: no experience to train on (expected %d); the policy is unchanged", expected
            )
            return self._step_metrics(
                {}, skipped=True, read_s=read_s, publish_s=0.0, checkpoint_s=0.0, idle_s=idle_s, busy_s=read_s
            )
        with self.source.holding(leases):
            self.source.confirm(leases)
            metrics = self.trainer.train_step(experiences)
        self.source.commit(leases)
        publish_start = time.perf_counter()
        self._publish()
        publish_s = time.perf_counter() - publish_start
        checkpoint_start = time.perf_counter()
        self.trainer.save_checkpoint_if_due()
        now = time.perf_counter()
        self._idle_since = now
        return self._step_metrics(
            metrics,
            skipped=False,
            read_s=read_s,
            publish_s=publish_s,
            checkpoint_s=now - checkpoint_start,
            idle_s=idle_s,
            busy_s=now - start,
        )

    def _step_metrics(
        self,
        metrics: dict[str, float],
        *,
        skipped: bool,
        read_s: float,
        publish_s: float,
        checkpoint_s: float,
        idle_s: float,
        busy_s: float,
    ) -> dict[str, float]:
        """The same keys every step (zeros for a skipped one), then the trainer's own under ``trainer/``."""
        out = {key: sum(metrics.get(name, 0.0) for name in names) for key, names in TRAIN_KEYS.items()}
        return (
            out
            | {
                "train/skipped": float(skipped),
                "perf/read_s": read_s,
                "perf/publish_s": publish_s,
                "perf/checkpoint_s": checkpoint_s,
                "perf/trainer_idle_ratio": idle_s / (idle_s + busy_s) if idle_s + busy_s > 0 else 0.0,
                "policy_version": float(self.policy_version),
            }
            | {f"trainer/{k}": v for k, v in metrics.items()}
        )

    def checkpoint(self) -> Path | None:
        """Save a checkpoint now (on a clean stop), when the trainer has a checkpoint directory."""
        root = self.trainer.cfg.checkpoint_dir
        return None if root is None else self.trainer.save_checkpoint(root)

    def _publish(self) -> None:
        if self.trainer.publisher is None:
            return
        self.trainer.publish()
        self.versions.advance(self.policy_version)
