"""The learner actor: the trainer, reading the experience stream and publishing weights.

Built the same way on a first start, on ``--resume`` and on a restart by Ray after a crash: it resumes
from the newest checkpoint in the run directory when there is one (republishing its weights above every
recorded version), else publishes the initial weights as version 0.

When the run evaluates (``selfplay.eval_every``), the learner also scores its policy between steps, on the
run's executor (``azr.eval.policy``): it holds the freshest weights, so nothing is loaded for it.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from transformers.utils import logging as hf_logging

from azr.eval.policy import PolicyEvalSettings, PolicyEvaluator
from azr.executor.api import Executor
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
        *,
        evaluation: PolicyEvalSettings | None = None,
        executor: Executor | None = None,
    ) -> None:
        if (evaluation is None) != (executor is None):
            raise ValueError("evaluating the policy needs both the evaluation settings and an executor")
        # Transformers draws a progress bar for every checkpoint it writes; in this process that is one bar
        # every few steps in the run's log, saying nothing the learner's own log lines do not.
        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        client = connect(redis)
        keys = Keys(redis.prefix)
        consumer = ExperienceStream(client, keys, stream, consumer=LEARNER_CONSUMER)
        policy = Trainer(trainer, publisher=DirectoryPublisher(Path(weights_dir), keep=2))
        self.learner = Learner(
            policy,
            StreamSource(consumer, block_ms=min(stream.block_ms, 500)),
            RunStateVersions(RunState(client, keys)),
            sampler_temperature=sampler_temperature,
        )
        self.evaluator = None if evaluation is None else PolicyEvaluator(policy, evaluation)
        self.executor = executor
        if trainer.checkpoint_dir is None or not self.learner.resume(trainer.checkpoint_dir):
            self.learner.publish_initial()

    def step(self, expected: int, evaluate: bool = False) -> dict[str, float]:
        """One learner step; with ``evaluate``, the updated policy's scores join its metrics. One call for
        both: should the learner die in between, Ray re-issues the whole call, so the scores are never
        those of a checkpoint restored meanwhile."""
        metrics = self.learner.step(expected)
        return (metrics | self.evaluate()) if evaluate else metrics

    def evaluate(self) -> dict[str, float]:
        """The current policy's ``eval/...`` scores (``azr.eval.policy``)."""
        if self.evaluator is None or self.executor is None:
            raise RuntimeError("this learner was built without evaluation settings: set selfplay.eval_every")
        # A plain actor has no event loop of its own; the executor's calls are awaited in one made here.
        return asyncio.run(self.evaluator.metrics(self.executor))

    def checkpoint(self) -> str | None:
        path = self.learner.checkpoint()
        return None if path is None else str(path)

    def state(self) -> tuple[int, int]:
        """(training steps done, policy version)."""
        return self.learner.steps_done, self.learner.policy_version
