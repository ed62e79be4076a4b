"""The unit of training data: one response to a prompt, with its reward.

The trainer sees nothing else of self-play: it groups by ``(role, task_type)`` and never needs a task.
Token ids and log-probs are numpy arrays so that the Redis codec can pack them as raw bytes.

Most experiences are *sampled*: the policy wrote the response, and the trainer reinforces it by its
reward. A *demonstration* is a buffer task written as a role writes it (the solver's: the executor's gold
answer; the proposer's: the task itself, answering a prompt that shows other tasks): the trainer imitates
it (maximises its likelihood) instead. Its behaviour log-probs are all 0, which is
exact: the executor writes that response with probability 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from azr.core.task import Role, TaskType


class ExperienceKind(StrEnum):
    """Who wrote the response, and so how the trainer learns from it."""

    SAMPLED = "sampled"
    """The policy, sampling: reinforced by its reward."""
    DEMONSTRATION = "demonstration"
    """The executor's gold answer: imitated."""


@dataclass(slots=True)
class Experience:
    id: str
    run_id: str
    policy_version: int
    role: Role
    task_type: TaskType
    prompt_ids: npt.NDArray[np.int32]  # (P,)
    response_ids: npt.NDArray[np.int32]  # (R,)
    behaviour_logprobs: npt.NDArray[np.float32]  # (R,) log-prob of each response token under the sampler
    reward: float
    reward_parts: dict[str, float] = field(default_factory=dict)
    task_id: str = ""
    kind: ExperienceKind = ExperienceKind.SAMPLED

    def __post_init__(self) -> None:
        self.prompt_ids = np.asarray(self.prompt_ids, dtype=np.int32)
        self.response_ids = np.asarray(self.response_ids, dtype=np.int32)
        self.behaviour_logprobs = np.asarray(self.behaviour_logprobs, dtype=np.float32)
        self.role = Role(self.role)  # a plain string from a codec or a test becomes the enum, or fails
        self.task_type = TaskType(self.task_type)
        self.kind = ExperienceKind(self.kind)
        if self.response_ids.shape != self.behaviour_logprobs.shape:
            raise ValueError(
                f"one behaviour log-prob per response token: {self.response_ids.shape} ids vs "
                f"{self.behaviour_logprobs.shape} log-probs"
            )
        if self.response_ids.size == 0:
            raise ValueError("an experience needs at least one response token")
        if self.kind is ExperienceKind.DEMONSTRATION and self.behaviour_logprobs.any():
            raise ValueError(
                "a demonstration's behaviour log-probs are all 0: the executor writes its response with "
                "probability 1"
            )

    @property
    def group(self) -> tuple[Role, TaskType]:
        """The (role, task type) group that TRR++ whitens within."""
        return (self.role, self.task_type)
