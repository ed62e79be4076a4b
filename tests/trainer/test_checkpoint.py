"""Checkpoints resume exactly; saved models and published weights load where they must."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from azr.trainer.checkpoint import latest_checkpoint, list_checkpoints
from azr.trainer.config import TrainerConfig
from azr.trainer.trainer import Trainer
from azr.trainer.weights import DirectoryPublisher, InMemoryPublisher, latest_snapshot, load_into
from tests.trainer.conftest import params_of, random_experiences


@pytest.mark.parametrize(
    "engine",
    [{"engine": "torch"}, {"engine": "deepspeed", "zero_stage": 1}, {"engine": "deepspeed", "zero_stage": 3}],
    ids=["torch", "deepspeed-1", "deepspeed-3"],
)
def test_resume_gives_the_same_next_losses_bit_for_bit(
    make_config: Callable[..., TrainerConfig], tmp_path: Path, engine: dict[str, Any]
) -> None:
    # Two mini-batches per step with shuffling: the next loss depends on weights, Adam moments, the
    # schedule and the shuffling generator, all of which must come back.
    cfg = make_config(mini_batch_size=6, micro_batch_size=3, lr_warmup_steps=5, **engine)
    batches = [random_experiences(seed=s) for s in range(3)]
    original = Trainer(cfg)
    original.train_step(batches[0])
    checkpoint = original.save_checkpoint(tmp_path)
    expected = [original.train_step(b) for b in batches[1:]]

    resumed = Trainer(cfg)
    resumed.resume(checkpoint)
    assert resumed.state == original.state.__class__(
        step=1, policy_version=1, consumed_experiences=12, optimizer_steps=2
    )
    got = [resumed.train_step(b) for b in batches[1:]]
    for want, have in zip(expected, got, strict=True):
        assert have["losses/loss"] == want["losses/loss"]
        assert have["optim/grad_norm"] == want["optim/grad_norm"]
        assert have["optim/lr"] == want["optim/lr"]
    final_original = original.engine.state_dict_for_publishing(torch.float32)
    final_resumed = resumed.engine.state_dict_for_publishing(torch.float32)
    for name, value in final_original.items():
        assert torch.equal(final_resumed[name], value), name


@pytest.mark.parametrize(
    "engine", [{"engine": "torch"}, {"engine": "deepspeed", "zero_stage": 3}], ids=["torch", "deepspeed-3"]
)
def test_saved_model_loads_with_transformers(
    make_config: Callable[..., TrainerConfig], tmp_path: Path, engine: dict[str, Any]
) -> None:
    trainer = Trainer(make_config(**engine))
    trainer.train_step(random_experiences())
    checkpoint = trainer.save_checkpoint(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(checkpoint / "model")
    tok = AutoTokenizer.from_pretrained(checkpoint / "model")
    assert tok.pad_token_id == trainer.pad_token_id
    loaded_params = dict(loaded.named_parameters())
    for name, value in trainer.engine.state_dict_for_publishing(torch.float32).items():
        assert torch.equal(loaded_params[name], value), name


def test_checkpoints_rotate_and_latest_is_newest(
    make_config: Callable[..., TrainerConfig], tmp_path: Path
) -> None:
    trainer = Trainer(make_config(checkpoint_dir=tmp_path, checkpoint_interval=1, keep_checkpoints=2))
    for seed in range(3):
        trainer.train_step(random_experiences(seed=seed))
        trainer.save_checkpoint_if_due()
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-00000002", "step-00000003"]
    assert latest_checkpoint(tmp_path) == tmp_path / "step-00000003"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no temporary leftovers"


def test_resume_from_a_missing_checkpoint_says_so(
    make_config: Callable[..., TrainerConfig], tmp_path: Path
) -> None:
    trainer = Trainer(make_config())
    with pytest.raises(FileNotFoundError, match=r"trainer_state\.json"):
        trainer.resume(tmp_path / "step-00000001")


def test_published_snapshot_reproduces_the_trained_model(
    make_config: Callable[..., TrainerConfig], tmp_path: Path, tiny_model_dir: Path
) -> None:
    publisher = DirectoryPublisher(tmp_path / "weights", keep=2)
    trainer = Trainer(make_config(), publisher=publisher)
    for seed in range(3):
        trainer.train_step(random_experiences(seed=seed))
        latest = publisher.latest()
        assert latest is None or latest.version < trainer.state.policy_version, (
            "train_step alone never publishes: the learner publishes after acknowledging the batch"
        )
        trainer.publish()
    snapshot = latest_snapshot(tmp_path / "weights")
    assert snapshot is not None and snapshot.version == 3
    assert sorted(p.name for p in (tmp_path / "weights").iterdir()) == [
        "policy-v00000002.safetensors",
        "policy-v00000003.safetensors",
    ]
    actor = AutoModelForCausalLM.from_pretrained(tiny_model_dir)  # an actor still on the initial weights
    load_into(actor, snapshot.tensors())
    ids = torch.tensor([[5, 17, 42, 99, 7]])
    with torch.no_grad():
        torch.testing.assert_close(
            actor(input_ids=ids).logits, trainer.engine.module(input_ids=ids).logits, rtol=0, atol=0
        )


def test_in_memory_snapshot_and_mismatched_weights(
    make_config: Callable[..., TrainerConfig], tiny_model_dir: Path
) -> None:
    publisher = InMemoryPublisher()
    trainer = Trainer(make_config(), publisher=publisher)
    trainer.train_step(random_experiences())
    assert publisher.latest() is None
    trainer.publish()
    snapshot = publisher.latest()
    assert snapshot is not None and snapshot.version == 1
    actor = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    load_into(actor, snapshot.tensors())
    for name, value in params_of(trainer.engine.module).items():
        assert torch.equal(dict(actor.named_parameters())[name], value), name
    broken = dict(snapshot.tensors())
    broken.pop("model.norm.weight")
    broken["model.extra.weight"] = torch.zeros(1)
    with pytest.raises(
        ValueError, match=r"missing \['model.norm.weight'\], unexpected \['model.extra.weight'\]"
    ):
        load_into(actor, broken)
