"""Scoring the policy while it trains: the same scores ``azr eval`` gives its weights (the solver's, and with
``proposer_samples`` the proposer's), on the trainer's own model, with training's state (mode, random
generators, weights) as it was."""

from __future__ import annotations

import asyncio
from pathlib import Path

import torch

from azr.core.task import TaskType
from azr.eval.policy import PolicyEvalSettings, PolicyEvaluator
from azr.eval.proposals import ProposerReport
from azr.eval.runner import Sampling, evaluate_checkpoint, evaluate_proposer_checkpoint
from azr.eval.scoring import EvalReport
from azr.eval.suites import load_suite
from azr.executor.pool import ExecutorPool
from azr.roles.config import RolesConfig
from azr.trainer.config import TrainerConfig
from azr.trainer.trainer import Trainer

MAX_NEW_TOKENS = 8


def make_trainer(model_dir: Path) -> Trainer:
    return Trainer(TrainerConfig(model=str(model_dir), device="cpu", gradient_checkpointing=False))


def scores(report: EvalReport) -> dict[str, tuple[int, int, int, float, float, float]]:
    return {
        name: (s.tasks, s.invalid, s.responses, s.pass_at_1, s.format_error_rate, s.mean_response_tokens)
        for name, s in [*report.by_type.items(), ("overall", report.overall)]
    }


def test_the_policy_scores_as_its_checkpoint_does_and_training_notices_nothing(tiny_model_dir: Path) -> None:
    trainer = make_trainer(tiny_model_dir)
    module = trainer.engine.module
    assert module.training, "a trainer's model starts in training mode"
    evaluator = PolicyEvaluator(
        trainer,
        PolicyEvalSettings(
            suites=("zero-seed",), roles=RolesConfig(), prompt_format="chat", max_new_tokens=MAX_NEW_TOKENS
        ),
    )
    modes: list[bool] = []
    hook = module.register_forward_pre_hook(lambda m, _: modes.append(m.training))
    torch.manual_seed(1234)
    rng_before = torch.get_rng_state()
    weights_before = {k: v.clone() for k, v in module.state_dict().items()}

    async def run() -> tuple[list[EvalReport], dict[str, float]]:
        async with ExecutorPool.create("local", workers=2) as pool:
            return await evaluator.reports(pool), await evaluator.metrics(pool)

    (report,), metrics = asyncio.run(run())
    hook.remove()

    assert modes and not any(modes), "generation ran in eval mode"
    assert module.training, "the model is back in training mode"
    assert torch.equal(torch.get_rng_state(), rng_before), "generation's reseeding did not leak into training"
    assert all(torch.equal(v, weights_before[k]) for k, v in module.state_dict().items())

    tasks = len(load_suite("zero-seed"))
    assert report.overall.tasks == report.overall.responses == tasks and report.overall.unjudged == 0
    assert all(report.by_type[t.value].tasks == 1 for t in TaskType)
    checkpoint = asyncio.run(
        evaluate_checkpoint(
            tiny_model_dir,
            load_suite("zero-seed"),
            suite="zero-seed",
            sampling=Sampling(max_new_tokens=MAX_NEW_TOKENS),
        )
    )
    assert scores(report) == scores(checkpoint), "the run's scores and `azr eval`'s disagree"

    names = [*(t.value for t in TaskType), "overall"]
    expected = {f"eval/zero-seed/{n}/{k}" for n in names for k in ("accuracy", "format_error_rate")}
    assert set(metrics) == expected | {"perf/eval_s"}
    for name, score in [*report.by_type.items(), ("overall", report.overall)]:
        assert metrics[f"eval/zero-seed/{name}/accuracy"] == score.pass_at_1
        assert metrics[f"eval/zero-seed/{name}/format_error_rate"] == score.format_error_rate


def test_the_policy_scores_its_proposer_as_its_checkpoint_does(tiny_model_dir: Path) -> None:
    trainer = make_trainer(tiny_model_dir)
    settings = PolicyEvalSettings(
        suites=("zero-seed",),
        roles=RolesConfig(),
        prompt_format="chat",
        max_new_tokens=MAX_NEW_TOKENS,
        proposer_samples=2,
        temperature=1.0,
    )
    evaluator = PolicyEvaluator(trainer, settings)
    torch.manual_seed(1234)
    rng_before = torch.get_rng_state()

    async def run() -> tuple[list[ProposerReport], dict[str, float]]:
        async with ExecutorPool.create("local", workers=2) as pool:
            return await evaluator.proposer_reports(pool), await evaluator.metrics(pool)

    (report,), metrics = asyncio.run(run())

    assert torch.equal(torch.get_rng_state(), rng_before), "sampling's reseeding did not leak into training"
    assert {name: s.prompts for name, s in report.by_type.items()} == {
        "deduction": 1,
        "abduction": 1,
        "induction": 2,
    }
    checkpoint = asyncio.run(
        evaluate_proposer_checkpoint(
            tiny_model_dir,
            load_suite("zero-seed"),
            suite="zero-seed",
            sampling=Sampling(samples=2, temperature=1.0, max_new_tokens=MAX_NEW_TOKENS),
        )
    )
    texts = [[v.text for v in r.verdicts] for r in report.requests]
    assert texts == [[v.text for v in r.verdicts] for r in checkpoint.requests], (
        "the run and `azr eval` disagree"
    )
    assert len({text for row in texts for text in row}) > 1, "the proposals are sampled"
    for name, score in [*report.by_type.items(), ("overall", report.overall)]:
        assert metrics[f"eval/zero-seed/propose/{name}/valid_rate"] == score.valid_rate
    assert "eval/zero-seed/overall/accuracy" in metrics, "the solver is still scored"
