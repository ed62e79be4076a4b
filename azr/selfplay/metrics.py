"""Curriculum metrics of one round: what was proposed, what was valid, what was solved, at what cost.

Every key is present every step (zero when nothing happened), so a chart or a ``metrics.jsonl`` reader never
meets a missing series: per task type, in a run that proposes (``selfplay.propose``, the default; a run of
the solver alone has no proposer series rather than a flat zero that reads as a proposer writing nothing
valid) ``propose/<type>/{count,valid_rate,reward_mean,learnability_mean,complexity_mean,demonstrations}``
(``demonstrations``: buffer tasks imitated as proposals with ``selfplay.proposer_demonstrations``),
``solve/<type>/{count,accuracy,reward_mean,rollouts_trained,demonstrations}`` (``count`` counts answers,
several per task with ``selfplay.solve_samples``; ``rollouts_trained`` counts the learnability rollouts
trained as solver answers with ``train_rollouts``, ``demonstrations`` the gold answers to imitate with
``selfplay.demonstrations``; neither is in the accuracy),
``buffer/<type>/size``; in a run with the induction message check (and only there)
``propose/induction/{misleading_rate,message_gain_mean}`` (the share of checked valid proposals whose
message misleads, and their mean solve rate with the message minus without it; 0 when none was checked);
one ``executor/errors/<class>`` per executor error class; ``rewards/dropped``
(responses the executor could not judge); ``response/length_mean`` in tokens;
``perf/{generate,execute,store}_s`` (generation split into ``perf/generate_propose_s`` and
``perf/generate_solve_s``, the learnability rollouts and answers).

``learnability_mean`` averages the learnability of the valid proposals whose solve rate was measured; with
the constant propose reward (the ablation) none is, and it stays 0 rather than echo the constant, which
would read as a measured learnability. Their reward shows in ``reward_mean``.
"""

from __future__ import annotations

import ast
import math
import time
from collections import defaultdict
from collections.abc import Mapping

from azr.core.task import Role, Task, TaskType
from azr.executor.errors import ErrorCode
from azr.proposer.rewards import MISLEADING_MESSAGE, SOLVE_RATE, SOLVE_RATE_WITHOUT_MESSAGE
from azr.roles.errors import FormatFailure
from azr.roles.shaping import NoReward, Reward


def program_complexity(program: str) -> int:
    """Size of a program as its number of AST nodes (0 when it does not parse)."""
    try:
        return sum(1 for _ in ast.walk(ast.parse(program)))
    except (SyntaxError, ValueError, RecursionError):
        return 0


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


class RoundMetrics:
    """Accumulates one round's numbers; ``finish`` returns them as a flat, namespaced dict."""

    def __init__(self, *, message_check: bool = False, proposing: bool = True) -> None:
        self.message_check = message_check
        self.proposing = proposing
        self._counts: dict[str, float] = defaultdict(float)
        self._values: dict[str, list[float]] = defaultdict(list)
        self._gauges: dict[str, float] = {}

    def count(self, name: str, by: float = 1.0) -> None:
        self._counts[name] += by

    def time(self, name: str, start: float) -> None:
        """Add the seconds since ``start`` (a ``time.perf_counter`` reading) to ``perf/<name>``."""
        self._counts[f"perf/{name}"] += time.perf_counter() - start

    def executor_error(self, code: ErrorCode) -> None:
        self._counts[f"executor/errors/{code.value}"] += 1

    def proposal(
        self,
        task_type: TaskType,
        parsed: Task | FormatFailure,
        valid: Task | None,
        reward: Reward | NoReward,
        length: int,
    ) -> None:
        prefix = f"propose/{task_type.value}"
        self._counts[f"{prefix}/count"] += 1
        self._values["response/length"].append(length)
        if valid is not None:
            self._counts[f"{prefix}/valid"] += 1
            self._values[f"{prefix}/complexity"].append(program_complexity(valid.program))
        if isinstance(reward, NoReward):
            self._counts["rewards/dropped"] += 1
            return
        self._values[f"{prefix}/reward"].append(reward.value)
        if valid is not None and SOLVE_RATE in reward.parts:
            self._values[f"{prefix}/learnability"].append(reward.parts["role"])
        if MISLEADING_MESSAGE in reward.parts:
            self._values[f"{prefix}/misleading"].append(reward.parts[MISLEADING_MESSAGE])
            gain = reward.parts[SOLVE_RATE] - reward.parts[SOLVE_RATE_WITHOUT_MESSAGE]
            self._values[f"{prefix}/message_gain"].append(gain)

    def solve(
        self, task_type: TaskType, reward: Reward | NoReward, length: int, *, rollout: bool = False
    ) -> None:
        """An answer of the solver; a learnability rollout trained as one (``rollout``, with
        ``SelfPlayConfig.train_rollouts``) is only counted, so that the solver's accuracy and the response
        length stay those of the answers to buffer tasks whether rollouts are trained or not."""
        prefix = f"solve/{task_type.value}"
        if isinstance(reward, NoReward):
            self._counts["rewards/dropped"] += 1
        if rollout:
            self._counts[f"{prefix}/rollouts_trained"] += not isinstance(reward, NoReward)
            return
        self._counts[f"{prefix}/count"] += 1
        self._values["response/length"].append(length)
        if isinstance(reward, NoReward):
            return
        self._values[f"{prefix}/reward"].append(reward.value)
        self._counts[f"{prefix}/correct"] += reward.parts.get("role", 0.0) == 1.0

    def demonstration(self, role: Role, task_type: TaskType) -> None:
        """A buffer task written as ``role``'s answer (the solver's: its gold answer), for the trainer to
        imitate."""
        self._counts[f"{role.value}/{task_type.value}/demonstrations"] += 1

    def buffer_sizes(self, sizes: Mapping[TaskType, int]) -> None:
        for task_type, size in sizes.items():
            self._gauges[f"buffer/{task_type.value}/size"] = float(size)

    def finish(self) -> dict[str, float]:
        out: dict[str, float] = {}
        c, v = self._counts, self._values
        for t in TaskType:
            p, s = f"propose/{t.value}", f"solve/{t.value}"
            proposed, solved = c[f"{p}/count"], c[f"{s}/count"]
            if self.proposing:
                out |= {
                    f"{p}/count": proposed,
                    f"{p}/valid_rate": c[f"{p}/valid"] / proposed if proposed else 0.0,
                    f"{p}/reward_mean": _mean(v[f"{p}/reward"]),
                    f"{p}/learnability_mean": _mean(v[f"{p}/learnability"]),
                    f"{p}/complexity_mean": _mean(v[f"{p}/complexity"]),
                    f"{p}/demonstrations": c[f"{p}/demonstrations"],
                }
            out |= {
                f"{s}/count": solved,
                f"{s}/accuracy": c[f"{s}/correct"] / solved if solved else 0.0,
                f"{s}/reward_mean": _mean(v[f"{s}/reward"]),
                f"{s}/rollouts_trained": c[f"{s}/rollouts_trained"],
                f"{s}/demonstrations": c[f"{s}/demonstrations"],
                f"buffer/{t.value}/size": self._gauges.get(f"buffer/{t.value}/size", 0.0),
            }
        if self.message_check and self.proposing:
            induction = f"propose/{TaskType.INDUCTION.value}"
            out |= {
                f"{induction}/misleading_rate": _mean(v[f"{induction}/misleading"]),
                f"{induction}/message_gain_mean": _mean(v[f"{induction}/message_gain"]),
            }
        out |= {f"executor/errors/{code.value}": c[f"executor/errors/{code.value}"] for code in ErrorCode}
        out |= {
            "rewards/dropped": c["rewards/dropped"],
            "response/length_mean": _mean(v["response/length"]),
            "perf/generate_s": c["perf/generate_propose_s"] + c["perf/generate_solve_s"],
            "perf/generate_propose_s": c["perf/generate_propose_s"],
            "perf/generate_solve_s": c["perf/generate_solve_s"],
            "perf/execute_s": c["perf/execute_s"],
            "perf/store_s": c["perf/store_s"],
        }
        out |= {
            k: val
            for k, val in c.items()
            if k.endswith(("/no_prompt", "/demonstrations_too_long", "/demonstrations_no_prompt"))
        }
        return out
