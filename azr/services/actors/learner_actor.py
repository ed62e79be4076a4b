"""The learner actor: the trainer, reading the experience stream and publishing weights.

Built the same way on a first start, on ``--resume`` and on a restart by Ray after a crash: it resumes
from the newest checkpoint in the run directory when there is one (republishing its weights above every
recorded version), else publishes the initial weights as version 0.
"""

from __future__ import annotations

import logging
from pathlib import Path

from azr.selfplay.learner import Learner
from azr.services.adapters import RunStateVersions, StreamSource
from azr.services.config import RedisConfig, StreamConfig
from azr.services.store import connect
from azr.services.store.experience_stream import ExperienceStream
from azr.services.store.keys import Keys
from azr.services.store.run_state import RunState
from azr.trainer.config import TrainerConfig
from azr.trainer.trainer import Trainer
from azr.trainer.weights import DirectoryPublisher

log = logging.getLogger(__name__)

LEARNER_CONSUMER = "learner"
"""The learner's consumer name in the stream, the same across restarts: a restarted learner finds the
experiences it was holding in its own pending list and trains them itself."""


class LearnerActor:
    def __init__(
        self,
        trainer: TrainerConfig,
        redis: RedisConfig,
        stream: StreamConfig,
        weights_dir: str,
        sampler_temperature: float,
    ) -> None:
        client = connect(redis)
        keys = Keys(redis.prefix)
        consumer = ExperienceStream(client, keys, stream, consumer=LEARNER_CONSUMER)
        self.learner = Learner(
            Trainer(trainer, publisher=DirectoryPublisher(Path(weights_dir), keep=2)),
            StreamSource(consumer, block_ms=min(stream.block_ms, 500)),
            RunStateVersions(RunState(client, keys)),
            sampler_temperature=sampler_temperature,
        )
        if trainer.checkpoint_dir is None or not self.learner.resume(trainer.checkpoint_dir):
            self.learner.publish_initial()

    def step(self, expected: int) -> dict[str, float]:
        return self.learner.step(expected)

    def checkpoint(self) -> str | None:
        path = self.learner.checkpoint()
        return None if path is None else str(path)

    def state(self) -> tuple[int, int]:
        """(training steps done, policy version)."""
        return self.learner.steps_done, self.learner.policy_version
