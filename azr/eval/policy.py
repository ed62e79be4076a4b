"""Scoring the policy while it trains: the trainer's own model, between two training steps.

A self-play run scores its policy every ``SelfPlayConfig.eval_every`` steps in the learner's process,
where the weights are freshest: nothing is written to disk or loaded again. The scoring is ``azr eval``'s
(``azr.eval.scoring``), greedy with one answer per task, so a run's curve and a checkpoint scored
afterwards agree. With ``proposer_samples`` set, the proposer is scored too (``azr.eval.proposals``, as
``azr eval --role propose``): the valid-task rate on requests that never change, at the training
temperature. Training must not notice: the model goes back to the mode it was in, the random number
generators (which generation reseeds) are restored, and no gradient is kept.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from pydantic import BaseModel, ConfigDict, Field

from azr.eval.generation import EvalModel, Response
from azr.eval.proposals import ProposerReport, evaluate_proposer
from azr.eval.scoring import EvalReport, Generate, evaluate
from azr.eval.suites import load_suite
from azr.executor.api import Executor
from azr.roles.config import RolesConfig
from azr.roles.templates import Prompt
from azr.selfplay.config import PromptFormat
from azr.selfplay.rendering import PromptRenderer
from azr.trainer.trainer import Trainer

KEPT = ("accuracy", "format_error_rate")
"""The per-type scores a run logs. pass@k is left out: with one greedy answer per task it is the accuracy."""


class PolicyEvalSettings(BaseModel):
    """What the learner scores its policy on, and how the policy is prompted (as in self-play)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    suites: tuple[str, ...] = Field(min_length=1, description="Built-in suites (azr.eval.suites).")
    roles: RolesConfig = Field(description="The run's roles: the solver's prompt and answer parsing.")
    prompt_format: PromptFormat = Field(description="How prompts are rendered (the run's format).")
    max_new_tokens: int = Field(ge=1, description="Token limit of an answer (the rollout's).")
    proposer_samples: int = Field(
        default=0, ge=0, description="Proposals per request when the proposer is scored too; 0: it is not."
    )
    temperature: float = Field(default=1.0, gt=0, description="The proposals' temperature (the rollout's).")


class PolicyEvaluator:
    """Scores ``trainer``'s current model on the suites of ``settings`` (tasks loaded once, here)."""

    def __init__(self, trainer: Trainer, settings: PolicyEvalSettings) -> None:
        self.trainer = trainer
        self.settings = settings
        self.suites = {name: load_suite(name) for name in settings.suites}
        self.model = EvalModel(trainer.engine.module, trainer.tokenizer)
        self.render = PromptRenderer(trainer.tokenizer, settings.prompt_format)

    async def reports(self, executor: Executor) -> list[EvalReport]:
        """One report per suite, for the policy as it is now."""
        version = f"policy version {self.trainer.state.policy_version}"
        with self._aside():
            return [
                await evaluate(
                    tasks,
                    self._generator(0.0),
                    executor,
                    self.settings.roles,
                    samples=1,
                    suite=name,
                    checkpoint=version,
                    temperature=0.0,
                )
                for name, tasks in self.suites.items()
            ]

    async def proposer_reports(self, executor: Executor) -> list[ProposerReport]:
        """One proposer report per suite, for the policy as it is now; none without ``proposer_samples``."""
        version = f"policy version {self.trainer.state.policy_version}"
        samples, temperature = self.settings.proposer_samples, self.settings.temperature
        generate = self._generator(temperature)
        with self._aside():
            return [
                await evaluate_proposer(
                    tasks,
                    generate,
                    lambda prompt: len(self.render(prompt)),
                    executor,
                    self.settings.roles,
                    samples=samples,
                    suite=name,
                    checkpoint=version,
                    temperature=temperature,
                )
                for name, tasks in self.suites.items()
                if samples
            ]

    async def metrics(self, executor: Executor) -> dict[str, float]:
        """``eval/<suite>/<type>/{accuracy,format_error_rate}`` (``overall`` among the types), with
        ``proposer_samples`` ``eval/<suite>/propose/<type>/valid_rate``, and ``perf/eval_s``."""
        start = time.perf_counter()
        reports = await self.reports(executor)
        out = {
            key: value
            for report in reports
            for key, value in report.metrics().items()
            if key.rsplit("/", 1)[-1] in KEPT
        }
        for proposer in await self.proposer_reports(executor):
            out |= proposer.metrics()
        return out | {"perf/eval_s": time.perf_counter() - start}

    def _generator(self, temperature: float) -> Generate:
        """The policy answering rendered prompts at ``temperature`` (0: greedy), reseeded for each call."""

        def generate(prompts: Sequence[Prompt], n: int) -> list[list[Response]]:
            ids = [self.render(p) for p in prompts]
            max_new_tokens = self.settings.max_new_tokens
            return self.model.generate(
                ids, n=n, temperature=temperature, max_new_tokens=max_new_tokens, seed=0
            )

        return generate

    @contextmanager
    def _aside(self) -> Iterator[None]:
        """Eval mode (no dropout) under the engine's mixed precision, with training's state kept aside."""
        module = self.trainer.engine.module
        training = module.training
        cuda = [module.device] if module.device.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda), self.trainer.engine.autocast():
            module.train(False)
            try:
                yield
            finally:
                module.train(training)
