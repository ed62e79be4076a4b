"""Fixtures for the loop's own tests: the real executor pool, real Redis buffers and stream, the tiny model.

No Ray here: the loop is plain code over protocols, and these tests drive it in one process.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import redis
from transformers import PreTrainedTokenizerBase

from azr.executor.pool import ExecutorPool
from azr.roles.config import RolesConfig
from azr.rollout.sampler import Completion
from azr.selfplay.config import SelfPlayConfig
from azr.selfplay.protocols import Executor, Generator
from azr.selfplay.rendering import PromptRenderer
from azr.selfplay.round import SelfPlayRound
from azr.services.adapters import RedisTaskStore, StreamSink
from azr.services.store.buffers import TaskBuffers
from azr.services.store.experience_stream import ExperienceStream
from azr.services.store.keys import Keys
from azr.services.store.metrics import Counters
from azr.trainer.models import load_tokenizer
from tests.services.store.conftest import client, keys, redis_config

__all__ = ["client", "keys", "redis_config"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def pool() -> AsyncIterator[ExecutorPool]:
    async with ExecutorPool.create("local", workers=2) as executor:
        yield executor


@pytest.fixture(scope="session")
def tokenizer(tiny_model_dir: Path) -> PreTrainedTokenizerBase:
    return load_tokenizer(str(tiny_model_dir))


class ScriptedGenerator:
    """Answers each prompt with a completion chosen by ``script(prompt_text, n)``, tokenized by the real
    tokenizer. It stands in for a policy that writes valid tasks, which a randomly initialised model cannot
    do; every other part of the round (rendering, parsing, the executor, buffers, rewards) is real."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, script: Callable[[str, int], list[str]]) -> None:
        self.tokenizer = tokenizer
        self.script = script
        self.prompts: list[str] = []
        self.calls: list[tuple[int, int]] = []
        """(prompts, completions per prompt) of every call, in order."""

    async def generate(self, prompts: Sequence[Sequence[int]], n: int) -> list[list[Completion]]:
        self.calls.append((len(prompts), n))
        await asyncio.sleep(0)
        out = []
        for ids in prompts:
            text = self.tokenizer.decode(list(ids))
            self.prompts.append(text)
            texts = self.script(text, n)
            assert len(texts) == n, f"the script must answer with {n} completions"
            out.append([self._completion(t) for t in texts])
        return out

    def _completion(self, text: str) -> Completion:
        ids = [int(i) for i in self.tokenizer(text, add_special_tokens=False)["input_ids"]]
        ids.append(int(self.tokenizer.eos_token_id))
        return Completion(token_ids=tuple(ids), logprobs=(-0.5,) * len(ids), text=text, finish_reason="stop")


def make_round(
    *,
    executor: Executor,
    generator: Generator,
    client: redis.Redis,
    keys: Keys,
    tokenizer: PreTrainedTokenizerBase,
    n_rollouts: int = 2,
    roles: RolesConfig | None = None,
    **selfplay: Any,
) -> tuple[SelfPlayRound, TaskBuffers, ExperienceStream]:
    """A round over the zero seed. ``selfplay`` sets ``SelfPlayConfig`` fields (one task per type and one
    sample per step unless it says otherwise); ``roles`` replaces the default roles config (n rollouts,
    2,048-token prompts)."""
    buffers = TaskBuffers(client, keys, seed=0)
    buffers.ensure_zero_seed()
    stream = ExperienceStream(client, keys, consumer="test")
    round_ = SelfPlayRound(
        SelfPlayConfig(**({"batch_size": 1, "samples_per_step": 1} | selfplay)),
        roles or RolesConfig(n_learnability_rollouts=n_rollouts, max_prompt_tokens=2048),
        executor=executor,
        generator=generator,
        store=RedisTaskStore(buffers, Counters(client, keys)),
        sink=StreamSink(stream),
        render=PromptRenderer(tokenizer, "chat"),
        temperature=1.0,
        max_response_tokens=256,
        run_id="test",
    )
    return round_, buffers, stream
