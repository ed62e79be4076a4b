"""The trainer learns the right thing: signs, masks and temperature line up with the sampler.

1. Alignment: responses sampled with Hugging Face ``generate`` carry the sampler's log-probs; the trainer,
   scoring the padded batch, must find the same numbers on the same tokens. A response mask or a
   behaviour log-prob placed one column off, or a temperature applied differently, breaks this.
2. Learning: each (role, task type) group has one prompt, a target completion rewarded +1 and distractors
   rewarded -1. After a few dozen steps the target must be far more likely and every distractor less
   likely, in both groups, with both engines. A sign error lowers the target instead.
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


def fixed_batch(model_dir: Path) -> list[Experience]:
    tok = AutoTokenizer.from_pretrained(model_dir)
    out = []
    for (role, task_type), (question, target, distractors) in TASKS.items():
        chat = [{"role": "user", "content": question}]
        prompt_text = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        prompt = tok.encode(prompt_text, add_special_tokens=False)
        for k, (text, reward) in enumerate([(target, 1.0)] + [(d, -1.0) for d in distractors]):
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


@pytest.mark.slow
@pytest.mark.parametrize(
    "engine", [{"engine": "torch"}, {"engine": "deepspeed", "zero_stage": 1}], ids=["torch", "deepspeed-1"]
)
def test_rewarded_completion_becomes_likely(
    make_config: Callable[..., TrainerConfig], tiny_model_dir: Path, engine: dict[str, Any]
) -> None:
    experiences = fixed_batch(tiny_model_dir)
    trainer = Trainer(make_config(lr=3e-4, mini_batch_size=8, micro_batch_size=4, **engine))
    before = completion_logprobs(trainer, experiences)
    for _ in range(30):  # on-policy: the sampler's weights are the trainer's of the step before
        metrics = trainer.train_step(on_policy(trainer, experiences))
    after = completion_logprobs(trainer, experiences)

    rewards = torch.tensor([e.reward for e in experiences])
    targets, distractors = rewards > 0, rewards < 0
    assert (after[targets] - before[targets]).min() > 5.0, (before, after)
    assert (after[distractors] < before[distractors]).all(), (before, after)
    for start in range(0, len(experiences), 4):  # each group: the target is now the likeliest completion
        assert int(after[start : start + 4].argmax()) == 0, (before, after)
    assert metrics["trainer/policy_version"] == 30
