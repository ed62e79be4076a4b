"""The trainer learns the right thing: signs, masks and temperature line up with the sampler.

1. Alignment: responses sampled with Hugging Face ``generate`` carry the sampler's log-probs; the trainer,
   scoring the padded batch, must find the same numbers on the same tokens. A response mask or a
   behaviour log-prob placed one column off, or a temperature applied differently, breaks this.
2. Learning: each (role, task type) group has one prompt, a target completion and three distractors, with
   AZR-like rewards whose patterns differ between the groups: the proposer's target is learnable
   (r_propose 0.75) and its distractors are not (0, 0, 0.25); the solver's target is well formatted but
   wrong (-0.5) and its distractors are broken (-1). TRR++ whitens within each group, so both targets
   rise, each more than any distractor of its group (distractors share tokens such as ``<answer>`` with
   their target, so they need not fall). REINFORCE++ whitens over the whole batch, where the solver's -0.5 is
   below the batch mean and the proposer's 0 above it: the solver's target would fall and the proposer's
   distractors rise, so the test tells the two estimators apart (and a sign error fails it as well). It
   learns at 1e-5, within 10x of the paper's learning rate.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from azr.core.experience import Experience
from azr.trainer.algorithms import AlgoConfig
from azr.trainer.config import TrainerConfig
from azr.trainer.trainer import Trainer
from tests.trainer.conftest import on_policy

TASKS = {
    ("solve", "deduction"): (
        "def f(x):\n    return x + 1\nWhat is f(3)?",
        "<answer>4</answer>",
        ["<answer>3</answer>", "<answer>5</answer>", "I do not know."],
    ),
    ("propose", "abduction"): (
        "Write a program f and an input for it.",
        "def f(s):\n    return s[::-1]",
        ["def f(x):\n    return x", "print('hello')", "<answer>1</answer>"],
    ),
}
REWARDS = {  # (target, distractors): the two groups' patterns differ (see the module docstring)
    ("solve", "deduction"): (-0.5, [-1.0, -1.0, -1.0]),
    ("propose", "abduction"): (0.75, [0.0, 0.0, 0.25]),
}


def fixed_batch(model_dir: Path) -> list[Experience]:
    tok = AutoTokenizer.from_pretrained(model_dir)
    out = []
    for (role, task_type), (question, target, distractors) in TASKS.items():
        chat = [{"role": "user", "content": question}]
        prompt_text = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        prompt = tok.encode(prompt_text, add_special_tokens=False)
        target_reward, distractor_rewards = REWARDS[(role, task_type)]
        pairs = [(target, target_reward), *zip(distractors, distractor_rewards, strict=True)]
        for k, (text, reward) in enumerate(pairs):
            response = tok.encode(text + "<|im_end|>", add_special_tokens=False)
            out.append(
                Experience(
                    id=f"{role}-{task_type}-{k}",
                    run_id="learning",
                    policy_version=0,
                    role=role,
                    task_type=task_type,
                    prompt_ids=np.asarray(prompt, dtype=np.int32),
                    response_ids=np.asarray(response, dtype=np.int32),
                    # Placeholders: each training step first rescores them with ``on_policy``.
                    behaviour_logprobs=np.zeros(len(response), dtype=np.float32),
                    reward=reward,
                )
            )
    return out


def completion_logprobs(trainer: Trainer, experiences: list[Experience]) -> torch.Tensor:
    """log p(response | prompt) of each experience under the trainer's current weights."""
    return torch.tensor([float(e.behaviour_logprobs.sum()) for e in on_policy(trainer, experiences)])  # (N,)


def sampled_experiences(model_dir: Path, temperature: float) -> list[Experience]:
    """Responses sampled from the tiny model, with the sampler's log-probs, as a rollout worker makes them."""
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    torch.manual_seed(0)
    out = []
    for (role, task_type), (question, _, _) in TASKS.items():
        chat = [{"role": "user", "content": question}]
        prompt = tok.encode(
            tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True),
            add_special_tokens=False,
        )
        for k in range(3):
            gen = model.generate(
                torch.tensor([prompt]),
                do_sample=True,
                temperature=temperature,
                top_k=0,
                top_p=1.0,
                max_new_tokens=int(8 + 5 * k),
                output_scores=True,
                return_dict_in_generate=True,
                pad_token_id=tok.pad_token_id,
            )
            response = gen.sequences[0, len(prompt) :]  # (R,)
            scores = torch.stack(gen.scores, dim=1)[0]  # (R, V) logits / temperature
            behaviour = torch.log_softmax(scores.float(), -1).gather(-1, response[:, None])[:, 0]  # (R,)
            out.append(
                Experience(
                    id=f"{role}-{task_type}-{k}",
                    run_id="alignment",
                    policy_version=0,
                    role=role,
                    task_type=task_type,
                    prompt_ids=np.asarray(prompt, dtype=np.int32),
                    response_ids=response.numpy(),
                    behaviour_logprobs=behaviour.numpy(),
                    reward=float(k % 2),
                )
            )
    return out


@pytest.fixture(scope="module")
def sampled(tiny_model_dir: Path) -> list[Experience]:
    return sampled_experiences(tiny_model_dir, temperature=0.7)


@pytest.mark.parametrize("old_logprobs", ["recompute", "behaviour"])
def test_trainer_scores_sampled_responses_like_the_sampler(
    make_config: Callable[..., TrainerConfig], sampled: list[Experience], old_logprobs: str
) -> None:
    assert len({len(e.response_ids) for e in sampled}) > 1, "rows of different lengths exercise padding"
    trainer = Trainer(make_config(temperature=0.7, micro_batch_size=2, old_logprobs=old_logprobs))
    metrics = trainer.train_step(sampled)
    assert metrics["mismatch/logprob_absdiff_max"] < 1e-4
    if old_logprobs == "behaviour":  # the ratio's denominator is the sampler's: on-policy it is 1
        assert metrics["policy/ratio_min"] == pytest.approx(1.0, abs=1e-4)
        assert metrics["policy/ratio_max"] == pytest.approx(1.0, abs=1e-4)


def train(trainer: Trainer, experiences: list[Experience], steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """log p(completion) of each experience before and after ``steps`` training steps on the batch."""
    before = completion_logprobs(trainer, experiences)
    for _ in range(steps):  # on-policy: the sampler's weights are the trainer's of the step before
        trainer.train_step(on_policy(trainer, experiences))
    return before, completion_logprobs(trainer, experiences)


LEARNING = {"lr": 1e-5, "mini_batch_size": 8, "micro_batch_size": 8}
STEPS = 12


@pytest.mark.parametrize(
    "engine",
    [
        pytest.param({"engine": "torch"}, id="torch"),
        pytest.param({"engine": "deepspeed", "zero_stage": 1}, id="deepspeed-1"),
    ],
)
def test_trr_raises_each_groups_target_above_its_distractors(
    make_config: Callable[..., TrainerConfig], tiny_model_dir: Path, engine: dict[str, Any]
) -> None:
    experiences = fixed_batch(tiny_model_dir)
    trainer = Trainer(make_config(**LEARNING, **engine))
    before, after = train(trainer, experiences, STEPS)
    for start in range(0, len(experiences), 4):  # each group: target first, then three distractors
        target, distractors = slice(start, start + 1), slice(start + 1, start + 4)
        gain = after - before
        assert gain[target].min() > 0.5, (before, after)
        assert gain[target].min() > gain[distractors].max(), (before, after)
    assert trainer.state.policy_version == STEPS


def test_reinforce_plus_plus_would_fail_the_trr_test(
    make_config: Callable[..., TrainerConfig], tiny_model_dir: Path
) -> None:
    """The control: one global whitening lowers the solver's target and raises the proposer's distractors."""
    experiences = fixed_batch(tiny_model_dir)
    trainer = Trainer(make_config(**LEARNING, algo=AlgoConfig(estimator="reinforce++")))
    before, after = train(trainer, experiences, STEPS)
    solver_target, proposer_distractors = slice(0, 1), slice(5, 7)  # the two rewarded 0.0
    assert (after[solver_target] < before[solver_target]).all(), (before, after)
    assert (after[proposer_distractors] > before[proposer_distractors]).all(), (before, after)
