"""The rollout worker actor: one copy of the policy, sampling for both roles."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from azr.rollout.config import RolloutConfig
from azr.rollout.factory import make_sampler
from azr.rollout.sampler import Completion
from azr.trainer.weights import latest_snapshot

log = logging.getLogger(__name__)


class RolloutWorker:
    """Samples completions from the newest weights it has loaded from ``weights_dir``."""

    def __init__(self, model: str, config: RolloutConfig, weights_dir: str) -> None:
        self.sampler = make_sampler(model, config)
        self.weights_dir = Path(weights_dir)
        self.sync()  # a restarted worker starts from the newest published weights, not the initial ones

    def sync(self) -> int:
        """Load the newest published snapshot if it is newer than the weights held; returns the version."""
        snapshot = latest_snapshot(self.weights_dir)
        if (
            snapshot is not None
            and snapshot.path is not None
            and snapshot.version > self.sampler.policy_version
        ):
            self.sampler.load_weights(snapshot.version, str(snapshot.path))
        return self.sampler.policy_version

    def generate(self, prompts: Sequence[Sequence[int]], n: int) -> list[list[Completion]]:
        return self.sampler.generate(prompts, n)

    def policy_version(self) -> int:
        return self.sampler.policy_version
