"""Configuration of the self-play loop: batch sizes, the seeding stage, the schedule and its evaluations."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from azr.core.task import TaskType

PromptFormat = Literal["chat", "base"]


class SelfPlayConfig(BaseModel):
    """What one step of self-play does. Defaults are the AZR paper's (Table 3) where it states them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch_size: int = Field(
        default=64,
        ge=1,
        le=65_536,
        description="B: proposals per task type and solver tasks per task type in each step (paper: 64); "
        "a step trains on up to 6 x B experiences, one group per (role, task type).",
    )
    seed_factor: int = Field(
        default=4,
        ge=0,
        le=1_000,
        description="S: the seeding stage proposes tasks until every buffer holds B x S tasks (paper: 4); "
        "0 skips the seeding stage.",
    )
    max_seed_rounds: int = Field(
        default=16,
        ge=0,
        le=100_000,
        description="Most proposal rounds of the seeding stage; a model that cannot yet write valid tasks "
        "stops there with what the buffers hold (the zero seed at least).",
    )
    propose: bool = Field(
        default=True,
        description="Whether the model proposes tasks. False: the solver trains alone on the buffers' "
        "tasks (the zero seed, `seed_tasks`, seeds posted to the API), with no proposals, seeding stage or "
        "proposer experiences: reinforcement learning with verifiable rewards on a fixed task set.",
    )
    seed_tasks: Path | None = Field(
        default=None,
        description="JSONL file of seed tasks (executor jobs or bare tasks, as `azr eval --tasks` reads) "
        "added to the buffers before the seeding stage of a new run. The executor validates each and "
        "computes its gold outputs (outputs in the file are ignored); a file with an invalid task stops "
        "the run before training, naming each invalid task and why.",
    )
    warm_start_seeds: int = Field(
        default=0,
        ge=0,
        le=100_000,
        description="Tasks per type that the warm start was taught to solve (the first of its data, drawn "
        "from the project's program families) added to the buffers of a new run as seeds, validated like "
        "`seed_tasks`. They give the proposer references and the demonstrations tasks whose induction "
        "messages describe their programs exactly. Only a warm start built by `azr pretrain` lists them "
        "(beside its weights); from any other model the run adds none, and logs so.",
    )
    solve_samples: int = Field(
        default=1,
        ge=1,
        le=1_024,
        description="Answers sampled for each task drawn to solve (paper: 1, baselined by TRR++ within its "
        "(role, task type) group). More give each task a group of its own answers, which the per-prompt "
        "estimators (trainer.algo.estimator grpo or rloo) compare: a solver experience then says how an "
        "answer did against other answers to the same task, not against easier or harder tasks.",
    )
    train_rollouts: bool = Field(
        default=False,
        description="Also train the solver on the learnability rollouts: the n answers sampled per valid "
        "proposal to rate it are on-policy solver responses at the training temperature, judged by the "
        "executor, so they become solver experiences at no extra generation cost (n x B more per type "
        "and step). Off, as in the paper: they only rate the proposal.",
    )
    demonstrations: int = Field(
        default=0,
        ge=0,
        le=65_536,
        description="Buffer tasks per task type, drawn uniformly each step, whose gold answers (the "
        "executor's outputs, written as the solver writes an answer) the trainer imitates beside the RL "
        "loss (weight trainer.algo.loss.imitation_coef). They need no generation: the executor computed "
        "every buffer task's answer when it validated it. 0, as in the paper: the model learns from its own "
        "samples only, one reward each.",
    )
    proposer_demonstrations: int = Field(
        default=0,
        ge=0,
        le=65_536,
        description="Buffer tasks per task type, drawn uniformly each step, that the trainer imitates as "
        "proposals: each task written as the proposer's answer to a prompt showing other buffer tasks as "
        "references (induction: giving the task's program). The solver's demonstrations train the same "
        "weights on the solver's format (an induction answer is a program block and nothing after it); "
        "with no proposer data beside them, a fast learning rate can teach the proposer to stop after its "
        "program block, and once every proposal of a type fails, TRR++ has no baseline to move it back. "
        "0, as in the paper.",
    )
    demonstration_types: tuple[TaskType, ...] = Field(
        default=tuple(TaskType),
        min_length=1,
        description="Task types whose buffer tasks are demonstrated. Leaving induction out keeps the "
        "proposer's messages, which may describe the program wrongly, out of what the solver imitates.",
    )
    demonstration_messages: bool = Field(
        default=True,
        description="Whether induction demonstrations show the task's message. False removes it from the "
        "prompt and the answer, so the solver imitates writing the program from the input/output pairs "
        "alone: a proposer's message may describe the program wrongly, and a demonstration must not pair "
        "a message with a program that contradicts it. Solver prompts outside demonstrations keep it.",
    )
    steps: int = Field(default=500, ge=1, le=10_000_000, description="Training steps of a run (paper: 500).")
    max_minutes: float | None = Field(
        default=None,
        gt=0,
        description="Wall-clock budget of the training schedule in minutes (seeding and the baseline "
        "evaluation excluded): after it no new step starts, the steps in flight finish and the run ends as "
        "if it had reached `steps`. Comparisons of methods share a time budget, not a step count, since "
        "their steps cost different amounts. None: only `steps` ends the run.",
    )
    max_staleness: int = Field(
        default=1,
        ge=0,
        le=1_000,
        description="Rollouts of step k may use policy version k - max_staleness or newer, so that rolling "
        "out step k overlaps training step k - 1. 0: synchronous (each step waits for the previous update).",
    )
    prompt_format: PromptFormat = Field(
        default="chat",
        description='"chat": prompts go through the tokenizer\'s chat template; "base": the plain '
        "conversation text for base models without one.",
    )
    samples_per_step: int = Field(
        default=2,
        ge=0,
        le=1_000,
        description="Responses per (role, task type) written to samples.jsonl each step, for reading.",
    )
    seed: int = Field(default=0, ge=0, description="Seeds reference sampling and buffer draws.")
    eval_every: int = Field(
        default=0,
        ge=0,
        le=10_000_000,
        description="Score the policy on eval_suites every this many training steps, after the last step, "
        "and once before the first (the baseline); 0: never. The learner scores its current weights greedily "
        "(temperature 0, one answer per task) with the rollout's max_new_tokens rather than a limit of its "
        "own: an answer is then judged under the length limit it is trained under, so the curve measures "
        "what training optimises, and a checkpoint scored afterwards with `azr eval` at that limit agrees.",
    )
    eval_suites: tuple[str, ...] = Field(
        default=("heldout",),
        min_length=1,
        description="Built-in suites to evaluate on (`azr eval --suite`: heldout, zero-seed); each gives "
        "eval/<suite>/<type>/accuracy and format_error_rate, and eval/<suite>/overall/accuracy.",
    )

    eval_proposer_samples: int = Field(
        default=0,
        ge=0,
        le=64,
        description="With eval_every: also score the proposer, this many proposals per request on requests "
        "built from each suite's tasks and the same at every evaluation (`azr eval --role propose`), at the "
        "training temperature: eval/<suite>/propose/<type>/valid_rate. propose/<type>/valid_rate is measured "
        "on prompts from buffers the run keeps changing; this rate compares the proposer with itself. 0: "
        "not scored (on the tiny preset, 2 proposals for each of the held-out suite's 400 requests take "
        "about a minute on 2 cores).",
    )

    @field_validator("eval_suites", "demonstration_types", mode="before")
    @classmethod
    def _one_name_as_a_tuple(cls, value: Any) -> Any:
        """``--set selfplay.eval_suites=heldout`` names one suite (one task type for
        ``demonstration_types``) without JSON list brackets."""
        return (value,) if isinstance(value, str) else value

    @field_validator("eval_suites", "demonstration_types")
    @classmethod
    def _each_name_once(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        twice = sorted({str(name) for name in value if value.count(name) > 1})
        if twice:
            raise ValueError(f"{info.field_name} names {', '.join(twice)} more than once: list each once")
        return value

    def evaluates_after(self, step: int) -> bool:
        """Whether the policy is scored after training step ``step`` (0-based): every ``eval_every`` steps
        and after the last one."""
        return self.eval_every > 0 and ((step + 1) % self.eval_every == 0 or step == self.steps - 1)
