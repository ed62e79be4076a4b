"""The trainer learns: rewarding a fixed completion raises its probability (signs and masks are right).

Each (role, task type) group has one prompt, a target completion rewarded +1 and distractors rewarded -1.
After a few dozen steps on that batch the target must be far more likely and every distractor less
likely, in both groups, with both engines. A sign error would lower the target; a response mask shifted by
one token would train on the prompt's last token and leave the completions' order unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoTokenizer

from azr.trainer.batch import collate
from azr.trainer.config import TrainerConfig
from azr.trainer.experience import Experience
from azr.trainer.logprobs import sequence_logprobs
from azr.trainer.trainer import Trainer

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
                    prompt_ids=prompt,
                    response_ids=response,
                    # Ignored by the default old_logprobs="recompute" except in the mismatch metrics.
                    behaviour_logprobs=[0.0] * len(response),
                    reward=reward,
                )
            )
    return out


@torch.no_grad()
def completion_logprobs(trainer: Trainer, experiences: list[Experience]) -> torch.Tensor:
    """log p(response | prompt) of each experience under the trainer's current weights."""
    batch = collate(experiences, trainer.pad_token_id)
    logprobs, _ = sequence_logprobs(
        trainer.engine.module, batch.input_ids, batch.attention_mask, with_entropy=False
    )
    return (logprobs * batch.response_mask).sum(1)  # (N,)


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
    for _ in range(30):
        metrics = trainer.train_step(experiences)
    after = completion_logprobs(trainer, experiences)

    rewards = torch.tensor([e.reward for e in experiences])
    targets, distractors = rewards > 0, rewards < 0
    assert (after[targets] - before[targets]).min() > 5.0, (before, after)
    assert (after[distractors] < before[distractors]).all(), (before, after)
    for start in range(0, len(experiences), 4):  # each group: the target is now the likeliest completion
        assert int(after[start : start + 4].argmax()) == 0, (before, after)
    assert metrics["trainer/policy_version"] == 30
