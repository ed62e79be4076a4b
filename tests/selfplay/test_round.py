"""One self-play round without Ray: the real executor pool, real Redis buffers and stream, the tiny model."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis
from transformers import PreTrainedTokenizerBase

from azr.core.experience import ExperienceKind
from azr.core.task import Origin, Role, Task, TaskType, TaskUse, zero_seed
from azr.executor.errors import ErrorCode, ExecError
from azr.executor.jobs import Job, JobResult, Judgement, Validation
from azr.executor.pool import ExecutorPool
from azr.proposer.parsing import parse_proposal
from azr.proposer.prompts import ProposalRequest
from azr.proposer.rewards import MISLEADING_MESSAGE, SOLVE_RATE, SOLVE_RATE_WITHOUT_MESSAGE
from azr.roles.completion import BlockKind, fenced
from azr.roles.config import RolesConfig
from azr.rollout.config import RolloutConfig
from azr.rollout.hf import HFSampler
from azr.selfplay.config import SelfPlayConfig
from azr.selfplay.local import SamplerGenerator
from azr.selfplay.seeding import SeedTasksError, add_seed_tasks, seed_buffers
from azr.services.store.keys import Keys
from azr.services.store.metrics import Counters, task_use
from azr.solver.parsing import Answer, parse_answer
from tests.selfplay.conftest import ScriptedGenerator, make_round

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

DOUBLE = "def f(x):\n    return x * 2"


def answer(body: str) -> str:
    return f"<think>Let me work it out.</think>\n<answer>\n{body}\n</answer>"


def script(prompt: str, n: int) -> list[str]:
    """A policy with known behaviour: one valid deduction task, one forbidden abduction task, a broken
    induction proposal; the doubling task solved once in two learnability rollouts, solved when asked
    to solve it; the abduction zero seed answered wrongly; the induction zero seed answered with no
    answer at all."""
    if "write a new deduction task" in prompt:
        return [answer(f"```python\n{DOUBLE}\n```\n```input\n3\n```")] * n
    if "write a new abduction task" in prompt:
        return [answer("```python\nimport os\ndef f(x):\n    return os.getcwd()\n```\n```input\n1\n```")] * n
    if "write inputs and a message" in prompt:
        return ["I am not sure what to do."] * n
    if "return x * 2" in prompt:
        return [answer("```output\n6\n```"), answer("```output\n7\n```")][:n]
    if "find an input" in prompt:
        return [answer("```input\n'Goodbye'\n```")] * n
    return ["no answer"] * n


def scripted(
    pool: ExecutorPool, client: redis.Redis, keys: Keys, tokenizer: PreTrainedTokenizerBase
) -> dict[str, Any]:
    """``make_round``'s arguments for a round of the scripted policy above."""
    generator = ScriptedGenerator(tokenizer, script)
    return {"executor": pool, "generator": generator, "client": client, "keys": keys, "tokenizer": tokenizer}


async def test_a_round_rewards_each_response_as_the_paper_says(
    pool: ExecutorPool, client: redis.Redis, keys: Keys, tokenizer: PreTrainedTokenizerBase
) -> None:
    generator = ScriptedGenerator(tokenizer, script)
    round_, buffers, stream = make_round(
        executor=pool, generator=generator, client=client, keys=keys, tokenizer=tokenizer
    )
    result = await round_.run(step=5, policy_version=3)

    rewards = {(e.role, e.task_type): e.reward for e in result.experiences}
    assert rewards == {
        (Role.PROPOSE, TaskType.DEDUCTION): 0.5,  # valid; solved in 1 of 2 rollouts: 1 - 0.5
        (Role.PROPOSE, TaskType.ABDUCTION): -1.0,  # rejected by the executor (forbidden import)
        (Role.PROPOSE, TaskType.INDUCTION): -1.0,  # broken format
        (Role.SOLVE, TaskType.DEDUCTION): 1.0,  # the new task, newest first, answered right
        (Role.SOLVE, TaskType.ABDUCTION): -0.5,  # well formatted, wrong
        (Role.SOLVE, TaskType.INDUCTION): -1.0,  # no answer
    }
    assert all(e.policy_version == 3 and e.run_id == "test" for e in result.experiences)
    assert stream.waiting() == len(result.experiences) == 6

    (new,) = result.new_tasks
    assert (new.program, new.inputs, new.outputs, new.step) == (DOUBLE, ("3",), ("6",), 5)
    assert buffers.sizes()[TaskType.DEDUCTION] == 2  # the zero seed and the new task

    m = result.metrics
    assert m["propose/deduction/valid_rate"] == 1.0 and m["propose/abduction/valid_rate"] == 0.0
    assert m["propose/deduction/learnability_mean"] == 0.5
    assert m["solve/deduction/accuracy"] == 1.0 and m["solve/abduction/accuracy"] == 0.0
    assert m["executor/errors/forbidden"] == 1.0
    assert m["buffer/deduction/size"] == 2.0
    assert m["propose/deduction/complexity_mean"] > 0
    assert {s["role"] for s in result.samples} == {"propose", "solve"}

    uses = Counters(client, keys)
    seeds = [zero_seed(t).id for t in (TaskType.DEDUCTION, TaskType.ABDUCTION)]
    shown = sum(uses.get(task_use(seed, TaskUse.REFERENCE)) for seed in seeds)
    assert shown == 3, "one reference per deduction and abduction proposal, one program for induction"
    assert uses.get_many([task_use(new.id, u) for u in TaskUse]) == {
        task_use(new.id, TaskUse.REFERENCE): 0,
        task_use(new.id, TaskUse.SOLVE): 1,
        task_use(new.id, TaskUse.SOLVE_ATTEMPTS): 3,  # two learnability rollouts and one answer
        task_use(new.id, TaskUse.SOLVED): 2,
    }


async def test_the_constant_propose_reward_pays_valid_proposals_and_samples_no_rollouts(
    pool: ExecutorPool, client: redis.Redis, keys: Keys, tokenizer: PreTrainedTokenizerBase
) -> None:
    """The ablation arm: the same policy as above, but the valid proposal earns the constant (0.25, not its
    learnability of 0.5), the penalties stay, and the solver is asked for answers only."""
    generator = ScriptedGenerator(tokenizer, script)
    roles = RolesConfig(max_prompt_tokens=2048, propose_reward="constant", constant_propose_reward=0.25)
    round_, _, _ = make_round(
        executor=pool, generator=generator, client=client, keys=keys, tokenizer=tokenizer, roles=roles
    )
    result = await round_.run(step=0, policy_version=0)

    rewards = {(e.role, e.task_type): e.reward for e in result.experiences}
    assert rewards == {
        (Role.PROPOSE, TaskType.DEDUCTION): 0.25,  # valid: the constant
        (Role.PROPOSE, TaskType.ABDUCTION): -1.0,  # rejected by the executor (forbidden import)
        (Role.PROPOSE, TaskType.INDUCTION): -1.0,  # broken format
        (Role.SOLVE, TaskType.DEDUCTION): 1.0,
        (Role.SOLVE, TaskType.ABDUCTION): -0.5,
        (Role.SOLVE, TaskType.INDUCTION): -1.0,
    }
    (valid,) = [e for e in result.experiences if (e.role, e.task_type) == (Role.PROPOSE, TaskType.DEDUCTION)]
    assert valid.reward_parts == {"format": 0.0, "validity": 0.0, "role": 0.25}

    # Three proposals, then three answers: the rollouts' share of the solver call holds no prompt.
    assert [call for call in generator.calls if call[0]] == [(3, 1), (3, 1)]
    assert len(generator.prompts) == 6
    (new,) = result.new_tasks
    uses = Counters(client, keys)
    assert uses.get(task_use(new.id, TaskUse.SOLVE_ATTEMPTS)) == 1, "the one answer, no rollouts"

    m = result.metrics
    assert m["propose/deduction/reward_mean"] == 0.25
    assert all(m[f"propose/{t.value}/learnability_mean"] == 0.0 for t in TaskType), "none was measured"


async def test_train_rollouts_turns_the_learnability_rollouts_into_solver_experiences(
    pool: ExecutorPool, client: redis.Redis, keys: Keys, tokenizer: PreTrainedTokenizerBase
) -> None:
    """The same policy with ``train_rollouts``: the doubling task's two rollouts (6, right; 7, wrong) join
    the solver's experiences with their own rewards, under the prompt they answered, and the proposal's
    learnability and the solver's accuracy are what they were without them."""
    generator = ScriptedGenerator(tokenizer, script)
    round_, _, stream = make_round(
        executor=pool, generator=generator, client=client, keys=keys, tokenizer=tokenizer, train_rollouts=True
    )
    result = await round_.run(step=0, policy_version=0)

    solved = [e for e in result.experiences if (e.role, e.task_type) == (Role.SOLVE, TaskType.DEDUCTION)]
    (new,) = result.new_tasks
    assert sorted(e.reward for e in solved) == [-0.5, 1.0, 1.0]  # the answer, then the rollouts 6 and 7
    assert {e.task_id for e in solved} == {new.id}
    assert len({tuple(e.prompt_ids) for e in solved}) == 1, "the rollouts answered the solver's prompt"
    texts = sorted(tokenizer.decode(e.response_ids, skip_special_tokens=True) for e in solved)
    assert texts == sorted(
        [answer("```output\n6\n```"), answer("```output\n6\n```"), answer("```output\n7\n```")]
    )
    assert stream.waiting() == len(result.experiences) == 8

    m = result.metrics
    assert m["propose/deduction/learnability_mean"] == 0.5
    assert m["solve/deduction/accuracy"] == 1.0 and m["solve/deduction/count"] == 1
    assert m["solve/deduction/rollouts_trained"] == 2 and m["solve/abduction/rollouts_trained"] == 0


async def test_demonstrations_are_the_executors_gold_answers_to_buffer_tasks(
    pool: ExecutorPool, client: redis.Redis, keys: Keys, tokenizer: PreTrainedTokenizerBase
) -> None:
    """Two per type, drawn from the buffers as the round leaves them (deduction: the zero seed and the new
    doubling task; abduction and induction: the zero seed only). Each is the solver's prompt for its task
    answered in the solver's format with what the executor computed, which the executor judges correct;
    the round's own answers and rewards are what they were without them."""
    round_, _, stream = make_round(**scripted(pool, client, keys, tokenizer), demonstrations=2)
    result = await round_.run(step=0, policy_version=4)

    demonstrations = [e for e in result.experiences if e.kind is ExperienceKind.DEMONSTRATION]
    assert Counter(e.task_type for e in demonstrations) == {
        TaskType.DEDUCTION: 2,
        TaskType.ABDUCTION: 1,
        TaskType.INDUCTION: 1,
    }
    (new,) = result.new_tasks
    tasks = {t.id: t for task_type in TaskType for t in round_.store.sample(task_type, 10)}
    assert new.id in {e.task_id for e in demonstrations}
    for e in demonstrations:
        task = tasks[e.task_id]
        assert (e.role, e.policy_version, e.behaviour_logprobs.any()) == (Role.SOLVE, 4, False)
        assert e.prompt_ids.tolist() == round_.solver_prompt_ids(task)
        assert e.response_ids[-1] == tokenizer.eos_token_id
        text = tokenizer.decode(e.response_ids, skip_special_tokens=True)
        parsed = parse_answer(text, task.type, round_.roles)
        assert isinstance(parsed, Answer), parsed
        judgement = await pool.check(task, parsed.text)
        assert judgement.correct, (task, parsed.text)

    sampled = [e for e in result.experiences if e.kind is ExperienceKind.SAMPLED]
    assert len(sampled) == 6 and stream.waiting() == len(result.experiences) == 10
    m = result.metrics
    assert (m["solve/deduction/demonstrations"], m["solve/induction/demonstrations"]) == (2, 1)
    assert m["solve/deduction/count"] == 1 and m["solve/deduction/accuracy"] == 1.0


async def test_a_demonstration_longer_than_any_sampled_response_is_not_imitated(
    pool: ExecutorPool, client: redis.Redis, keys: Keys, tokenizer: PreTrainedTokenizerBase
) -> None:
    round_, _, _ = make_round(**scripted(pool, client, keys, tokenizer), demonstrations=1)
    round_.max_response_tokens = 8  # shorter than every gold completion
    result = await round_.run(step=0, policy_version=0)
    assert not [e for e in result.experiences if e.kind is ExperienceKind.DEMONSTRATION]
    assert result.metrics["solve/abduction/demonstrations_too_long"] == 1
    assert result.metrics["solve/abduction/demonstrations"] == 0


async def test_only_the_chosen_task_types_are_demonstrated(
    pool: ExecutorPool, client: redis.Redis, keys: Keys, tokenizer: PreTrainedTokenizerBase
) -> None:
    round_, _, _ = make_round(
        **scripted(pool, client, keys, tokenizer),
        demonstrations=1,
        demonstration_types=(TaskType.DEDUCTION, TaskType.ABDUCTION),
    )
    result = await round_.run(step=0, policy_version=0)
    demonstrated = [e.task_type for e in result.experiences if e.kind is ExperienceKind.DEMONSTRATION]
    assert sorted(demonstrated) == sorted([TaskType.DEDUCTION, TaskType.ABDUCTION])
    assert result.metrics["solve/induction/demonstrations"] == 0


async def test_induction_demonstrations_without_messages_show_the_pairs_alone(
    pool: ExecutorPool, client: redis.Redis, keys: Keys, tokenizer: PreTrainedTokenizerBase
) -> None:
    """The zero seed's induction task has a message; its demonstration has none, in the prompt or the
    answer, and the program it writes still passes the executor's check."""
    round_, _, _ = make_round(
        **scripted(pool, client, keys, tokenizer),
        demonstrations=1,
        demonstration_types=(TaskType.INDUCTION,),
        demonstration_messages=False,
    )
    result = await round_.run(step=0, policy_version=0)
    (demonstration,) = [e for e in result.experiences if e.kind is ExperienceKind.DEMONSTRATION]
    (task,) = round_.store.sample(TaskType.INDUCTION, 1)
    assert task.message.strip()
    assert demonstration.prompt_ids.tolist() == round_.solver_prompt_ids(task.without_message())
    assert demonstration.prompt_ids.tolist() != round_.solver_prompt_ids(task)
    text = tokenizer.decode(demonstration.response_ids, skip_special_tokens=True)
    assert task.message.strip() not in text
    parsed = parse_answer(text, TaskType.INDUCTION, round_.roles)
    assert isinstance(parsed, Answer), parsed
    assert (await pool.check(task, parsed.text)).correct


async def test_proposer_demonstrations_write_buffer_tasks_as_proposals(
    pool: ExecutorPool, client: redis.Redis, keys: Keys, tokenizer: PreTrainedTokenizerBase
) -> None:
    """Two per type from the buffers as the round leaves them. Deduction holds the zero seed and the new
    doubling task: each is proposed in answer to a prompt that shows the other, never itself. Abduction
    holds one program, so there is nothing to show and no demonstration. Induction's is the zero seed's
    inputs and message for a prompt giving its program. The proposer's parser reads each back to its
    task, which the executor validates to the same outputs."""
    round_, _, _ = make_round(**scripted(pool, client, keys, tokenizer), proposer_demonstrations=2)
    result = await round_.run(step=0, policy_version=4)

    demonstrations = [e for e in result.experiences if e.kind is ExperienceKind.DEMONSTRATION]
    assert Counter((e.role, e.task_type) for e in demonstrations) == {
        (Role.PROPOSE, TaskType.DEDUCTION): 2,
        (Role.PROPOSE, TaskType.INDUCTION): 1,
    }
    tasks = {t.id: t for task_type in TaskType for t in round_.store.sample(task_type, 10)}
    for e in demonstrations:
        task = tasks[e.task_id]
        prompt = tokenizer.decode(e.prompt_ids, skip_special_tokens=True)
        others = [t for t in tasks.values() if t.type is task.type and t.id != task.id]
        if task.type is TaskType.INDUCTION:
            request = ProposalRequest(TaskType.INDUCTION, (task,))
            assert task.program in prompt
        else:
            shown = fenced(BlockKind.PYTHON, task.program)
            assert shown not in prompt and fenced(BlockKind.PYTHON, others[0].program) in prompt
            request = ProposalRequest(task.type, (others[0],))
        text = tokenizer.decode(e.response_ids, skip_special_tokens=True)
        proposed = parse_proposal(text, request, round_.roles)
        assert isinstance(proposed, Task), proposed
        # Inputs come back in canonical form ('Hello world' for "Hello world"): the same values give the
        # same outputs.
        assert (proposed.program, len(proposed.inputs), proposed.message) == (
            task.program,
            len(task.inputs),
            task.message,
        )
        assert (await pool.validate(proposed)).outputs == task.outputs

    m = result.metrics
    assert (m["propose/deduction/demonstrations"], m["propose/induction/demonstrations"]) == (2, 1)
    assert m["propose/abduction/demonstrations_no_prompt"] == 1
    assert m["solve/deduction/demonstrations"] == 0
    sampled = [e for e in result.experiences if e.kind is ExperienceKind.SAMPLED]
    assert len(sampled) == 6


async def test_a_valid_task_too_long_for_any_solver_prompt_is_a_too_long_proposal(
    pool: ExecutorPool, client: redis.Redis, keys: Keys, tokenizer: PreTrainedTokenizerBase
) -> None:
    """The executor accepts the program, but its solver prompt is over max_prompt_tokens: it can be neither
    solved nor rated, so the proposal is penalised as too long and the task never reaches the buffer."""
    long_program = f"def f(x):\n    return x + len({list(range(600))})"

    def policy(prompt: str, n: int) -> list[str]:
        if "write a new deduction task" in prompt:
            return [answer(f"```python\n{long_program}\n```\n```input\n3\n```")] * n
        return script(prompt, n)

    generator = ScriptedGenerator(tokenizer, policy)
    round_, buffers, _ = make_round(
        executor=pool, generator=generator, client=client, keys=keys, tokenizer=tokenizer
    )
    result = await round_.run(step=0, policy_version=0)

    (proposal,) = [
        e for e in result.experiences if (e.role, e.task_type) == (Role.PROPOSE, TaskType.DEDUCTION)
    ]
    assert proposal.reward == -1.0
    assert result.new_tasks == []
    assert buffers.sizes()[TaskType.DEDUCTION] == 1, "only the zero seed"
    assert not any(long_program in p for p in generator.prompts), "no rollout was sampled for it"
    assert result.metrics["propose/deduction/valid_rate"] == 0.0


IDENTITY = "def f(x):\n    return x"
MESSAGE = "f adds one to its argument."


def message_policy(*, without_message_solves: bool) -> Callable[[str, int], list[str]]:
    """A policy whose only valid proposal is an induction task (the zero seed's identity on 1..10, with
    MESSAGE); the solver answers it right in one of two rollouts with the message, and in both or in
    neither without it. Every other induction answer (the zero seed's, which has its own message) is
    right, and every other proposal is broken."""

    def policy(prompt: str, n: int) -> list[str]:
        if "write inputs and a message" in prompt:
            inputs = "\n".join(f"```input\n{i}\n```" for i in range(1, 11))
            return [answer(f"{inputs}\n```message\n{MESSAGE}\n```")] * n
        if "write the program behind some examples" in prompt:
            right, wrong = (
                answer(f"```python\n{IDENTITY}\n```"),
                answer("```python\ndef f(x):\n    return 0\n```"),
            )
            if MESSAGE in prompt:
                return [right, wrong][:n]
            if "```message" in prompt:
                return [right] * n
            return [right if without_message_solves else wrong] * n
        return ["no answer"] * n

    return policy


@pytest.mark.parametrize("misleading", [True, False], ids=["misleading", "helpful"])
async def test_the_message_check_withholds_the_reward_of_a_misleading_message(
    pool: ExecutorPool, client: redis.Redis, keys: Keys, tokenizer: PreTrainedTokenizerBase, misleading: bool
) -> None:
    """With the check, the induction task is also rolled out without its message. Solved more often
    without it, the message misleads: the proposal earns 0 instead of its learnability (0.5) and the task
    joins its buffer without the message; a helpful message is paid and kept. Either way the task joins
    after the round's answers were drawn, so this round's induction answer is to the zero seed."""
    generator = ScriptedGenerator(tokenizer, message_policy(without_message_solves=misleading))
    roles = RolesConfig(n_learnability_rollouts=2, max_prompt_tokens=2048, induction_message_check=True)
    round_, buffers, _ = make_round(
        executor=pool, generator=generator, client=client, keys=keys, tokenizer=tokenizer, roles=roles
    )
    result = await round_.run(step=0, policy_version=0)

    (proposal,) = [
        e for e in result.experiences if (e.role, e.task_type) == (Role.PROPOSE, TaskType.INDUCTION)
    ]
    assert proposal.reward == (0.0 if misleading else 0.5)
    assert proposal.reward_parts[SOLVE_RATE] == 0.5
    assert proposal.reward_parts[SOLVE_RATE_WITHOUT_MESSAGE] == (1.0 if misleading else 0.0)
    assert proposal.reward_parts[MISLEADING_MESSAGE] == float(misleading)
    assert (2, 2) in generator.calls, "two rollouts with the message and two without"

    (new,) = result.new_tasks
    assert new.message == ("" if misleading else MESSAGE)
    assert (new.id == proposal.task_id) is not misleading, "the proposal names the task with its message"
    assert new in buffers[TaskType.INDUCTION].newest(2)
    (solved,) = [e for e in result.experiences if (e.role, e.task_type) == (Role.SOLVE, TaskType.INDUCTION)]
    assert solved.task_id == zero_seed(TaskType.INDUCTION).id
    uses = Counters(client, keys)
    assert uses.get(task_use(new.id, TaskUse.SOLVE_ATTEMPTS)) == 2, "the rollouts of the task as buffered"

    m = result.metrics
    assert m["propose/induction/misleading_rate"] == float(misleading)
    assert m["propose/induction/message_gain_mean"] == (-0.5 if misleading else 0.5)


async def test_seeding_under_the_message_check_admits_induction_tasks_without_their_message(
    pool: ExecutorPool, client: redis.Redis, keys: Keys, tokenizer: PreTrainedTokenizerBase
) -> None:
    """Seeding samples no rollouts, so no message of it is checked, and none enters a buffer."""
    generator = ScriptedGenerator(tokenizer, message_policy(without_message_solves=True))
    roles = RolesConfig(n_learnability_rollouts=2, max_prompt_tokens=2048, induction_message_check=True)
    round_, buffers, _ = make_round(
        executor=pool, generator=generator, client=client, keys=keys, tokenizer=tokenizer, roles=roles
    )
    report = await seed_buffers(round_, SelfPlayConfig(batch_size=1, seed_factor=2, max_seed_rounds=1))

    assert report.added == 1
    seeded = [t for t in buffers[TaskType.INDUCTION].newest(2) if t.origin is not Origin.ZERO_SEED]
    assert [(t.program, t.message) for t in seeded] == [(IDENTITY, "")]


async def test_a_solver_only_round_trains_the_solver_on_the_seed_tasks(
    pool: ExecutorPool, client: redis.Redis, keys: Keys, tokenizer: PreTrainedTokenizerBase
) -> None:
    """``propose=false``: seed tasks go in with the executor's gold outputs (the file's are never read),
    the seeding stage proposes nothing, and a round asks only for answers, newest task first."""
    generator = ScriptedGenerator(tokenizer, script)
    round_, buffers, _ = make_round(
        executor=pool, generator=generator, client=client, keys=keys, tokenizer=tokenizer, propose=False
    )
    seed = Task(TaskType.DEDUCTION, DOUBLE, ("3",), outputs=("7",))
    assert await add_seed_tasks(round_, [seed], source="seeds.jsonl") == 1
    (stored,) = [t for t in buffers[TaskType.DEDUCTION].newest(2) if t.origin is not Origin.ZERO_SEED]
    assert (stored.program, stored.outputs, stored.origin) == (DOUBLE, ("6",), Origin.USER)

    report = await seed_buffers(round_, SelfPlayConfig(batch_size=1, seed_factor=4, propose=False))
    assert (report.rounds, report.proposed) == (0, 0)
    result = await round_.run(step=0, policy_version=0)

    assert not any("write a new" in p or "write inputs" in p for p in generator.prompts)
    rewards = {(e.role, e.task_type): e.reward for e in result.experiences}
    assert rewards == {
        (Role.SOLVE, TaskType.DEDUCTION): 1.0,  # the seed, answered 6
        (Role.SOLVE, TaskType.ABDUCTION): -0.5,
        (Role.SOLVE, TaskType.INDUCTION): -1.0,
    }
    assert result.new_tasks == []
    assert not [k for k in result.metrics if k.startswith("propose/")], "no proposer series at all"
    assert {s["role"] for s in result.samples} == {"solve"}


async def test_several_answers_per_task_share_its_prompt_and_count_as_one_draw(
    pool: ExecutorPool, client: redis.Redis, keys: Keys, tokenizer: PreTrainedTokenizerBase
) -> None:
    """``solve_samples=2``: the seed task is drawn once and answered twice (6, right; 7, wrong), both
    answers on the same prompt, which is what GRPO and RLOO group by."""
    generator = ScriptedGenerator(tokenizer, script)
    round_, _, _ = make_round(
        executor=pool,
        generator=generator,
        client=client,
        keys=keys,
        tokenizer=tokenizer,
        propose=False,
        solve_samples=2,
    )
    seed = Task(TaskType.DEDUCTION, DOUBLE, ("3",))
    await add_seed_tasks(round_, [seed], source="seeds.jsonl")
    result = await round_.run(step=0, policy_version=0)

    assert generator.calls[-1] == (3, 2), "one prompt per type, two answers each"
    answers = [e for e in result.experiences if e.task_type is TaskType.DEDUCTION]
    assert [e.reward for e in answers] == [1.0, -0.5]
    assert answers[0].prompt_ids.tolist() == answers[1].prompt_ids.tolist()
    assert result.metrics["solve/deduction/count"] == 2 and result.metrics["solve/deduction/accuracy"] == 0.5
    uses = Counters(client, keys)
    (stored_id,) = {e.task_id for e in answers}
    assert uses.get_many([task_use(stored_id, u) for u in TaskUse]) == {
        task_use(stored_id, TaskUse.REFERENCE): 0,
        task_use(stored_id, TaskUse.SOLVE): 1,
        task_use(stored_id, TaskUse.SOLVE_ATTEMPTS): 2,
        task_use(stored_id, TaskUse.SOLVED): 1,
    }


async def test_seed_tasks_are_added_all_or_none_with_each_refusal_explained(
    pool: ExecutorPool, client: redis.Redis, keys: Keys, tokenizer: PreTrainedTokenizerBase
) -> None:
    round_, buffers, _ = make_round(
        executor=pool,
        generator=ScriptedGenerator(tokenizer, script),
        client=client,
        keys=keys,
        tokenizer=tokenizer,
    )
    before = dict(buffers.sizes())
    tasks = [
        Task(TaskType.DEDUCTION, DOUBLE, ("3",)),
        Task(TaskType.ABDUCTION, "import os\ndef f(x):\n    return os.getcwd()", ("1",)),
        Task(TaskType.DEDUCTION, f"def f(x):\n    return x + len({list(range(600))})", ("3",)),
    ]
    with pytest.raises(SeedTasksError) as refused:
        await add_seed_tasks(round_, tasks, source="seeds.jsonl")

    assert [i for i, _ in refused.value.reasons] == [1, 2]
    assert refused.value.reasons[0][1].startswith("forbidden")
    assert "max_prompt_tokens=2048" in refused.value.reasons[1][1]
    assert str(refused.value).startswith("seeds.jsonl: 2 invalid seed task(s), none added: task 2: forbidden")
    assert dict(buffers.sizes()) == before, "the valid seed was not added either"

    one_pair = Task(TaskType.INDUCTION, DOUBLE, ("3",), message="doubles")
    with pytest.raises(SeedTasksError, match="task 2: an induction seed needs at least 2 inputs"):
        await add_seed_tasks(round_, [tasks[0], one_pair], source="seeds.jsonl")


class InfraFailingChecks:
    """The real pool, except that every check of an abduction answer fails as the executor does when a
    sandbox dies (``infra_error``): a fault that cannot be produced on demand."""

    def __init__(self, pool: ExecutorPool) -> None:
        self.pool = pool

    async def validate(self, task: Task) -> Validation:
        return await self.pool.validate(task)

    async def check(self, task: Task, answer: str) -> Judgement:
        if task.type is TaskType.ABDUCTION:
            return Judgement(ok=False, correct=None, error=ExecError(ErrorCode.INFRA_ERROR, "sandbox died"))
        return await self.pool.check(task, answer)

    async def submit(self, job: Job) -> JobResult:
        return await self.pool.submit(job)

    def map(self, jobs):  # type: ignore[no-untyped-def]
        return self.pool.map(jobs)


async def test_an_infra_error_gives_no_reward_and_no_experience(
    pool: ExecutorPool, client: redis.Redis, keys: Keys, tokenizer: PreTrainedTokenizerBase
) -> None:
    round_, _, stream = make_round(
        executor=InfraFailingChecks(pool),
        generator=ScriptedGenerator(tokenizer, script),
        client=client,
        keys=keys,
        tokenizer=tokenizer,
    )
    result = await round_.run(step=0, policy_version=0)
    groups = {(e.role, e.task_type) for e in result.experiences}
    assert (Role.SOLVE, TaskType.ABDUCTION) not in groups
    assert len(groups) == 5
    assert result.metrics["rewards/dropped"] == 1.0
    assert result.metrics["executor/errors/infra_error"] == 1.0
    assert stream.waiting() == 5


@pytest.mark.slow
async def test_a_round_with_the_tiny_model(
    pool: ExecutorPool,
    client: redis.Redis,
    keys: Keys,
    tokenizer: PreTrainedTokenizerBase,
    tiny_model_dir: Path,
) -> None:
    """The real sampler end to end: every (role, type) group gets experiences whose tokens and log-probs
    line up, and every metric is present and finite."""
    sampler = HFSampler(tiny_model_dir, RolloutConfig(max_new_tokens=16, device="cpu"))
    round_, _, stream = make_round(
        executor=pool, generator=SamplerGenerator(sampler), client=client, keys=keys, tokenizer=tokenizer
    )
    result = await round_.run(step=0, policy_version=0)
    assert {(e.role, e.task_type) for e in result.experiences} == {(r, t) for r in Role for t in TaskType}
    for e in result.experiences:
        assert 0 < len(e.response_ids) <= 16 and len(e.behaviour_logprobs) == len(e.response_ids)
        assert all(lp <= 0 for lp in e.behaviour_logprobs)
        assert -1.0 <= e.reward <= 1.0
    assert stream.waiting() == len(result.experiences)
    for t in TaskType:
        for name in ("valid_rate", "reward_mean", "learnability_mean"):
            assert math.isfinite(result.metrics[f"propose/{t.value}/{name}"])
        assert math.isfinite(result.metrics[f"solve/{t.value}/accuracy"])
    assert all(math.isfinite(v) for v in result.metrics.values())
