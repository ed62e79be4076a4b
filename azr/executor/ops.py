"""The trusted judge: validates tasks and checks answers, using a backend only to run programs.

Threat model. Programs, inputs, outputs and answers are untrusted text written by a model. What is covered:

- Nothing untrusted is evaluated or spliced into code here. Inputs and answers are parsed with
  ``azr.executor.values`` (literals only, size and depth capped) and re-rendered canonically before they
  reach a sandbox; an answer like ``[9]) or True or (0`` is not a literal and is rejected.
- Output prediction is judged by comparing parsed literals in this process (no run, no ``eval``): an
  answer cannot bring an object with a lying ``__eq__``.
- The text a sandbox returns is never trusted: every output is parsed again here with the same caps and
  rendered canonically; NaN, infinities and non-literals make the task invalid (``unsupported_value``).
- Determinism: a task runs in several sandbox interpreters with different hash seeds (two, or all ten
  of the pool when it may iterate a set: ``azr.executor.hash_order``), and their canonical outputs must
  all match, so set-order-dependent programs are ``nondeterministic``. A failed check always yields
  an error, never a valid task with empty outputs.
- Gold outputs are returned whole; long values are never cut.
- The static gate screens task programs and induction answer programs (when enabled). It is a quality
  filter; the sandbox backend is the security boundary.
- ``infra_error`` from a backend is passed through as "could not judge", never as a verdict.
- The work of one job is bounded: at most ``MAX_TASK_INPUTS`` argument lists per task, each run at most
  ``hash_order.SET_RUNS`` times.

Not covered here: isolation of the running program (the backend's job) and the size of a job's text
(callers cap lines; ``values`` caps literals; the gate caps programs). Answers are run once, in slot A:
an induction program whose output depends on hash order can be judged right by chance, which only
concerns that one answer (tasks, whose outputs become gold, are always run in both slots).

How ``ok``/``correct``/``error`` are set is documented in ``azr.executor.jobs``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TypeVar

from azr.core.task import Task, TaskType
from azr.executor.backends.base import Backend
from azr.executor.errors import ErrorCode, ExecError, ExecutorError
from azr.executor.gate import check_program
from azr.executor.hash_order import task_slots
from azr.executor.jobs import Judgement, Validation
from azr.executor.limits import SandboxLimits
from azr.executor.sandbox.records import HashSeedSlot, RunOutcome, RunRequest
from azr.executor.values import (
    DEFAULT_LIMITS,
    ValueLimits,
    ValueRejectedError,
    canonical,
    parse_args,
    parse_value,
    values_equal,
)

MAX_TASK_INPUTS = 64
"""Most argument lists one task may carry, which bounds one job at ``SET_RUNS`` x 64 sandboxed calls."""
T = TypeVar("T")

INLINE_PARSE_CHARS = 64 * 1024
"""Most output text, over the runs of one job, parsed on the event loop; more is parsed in a thread."""
_SHOWN_CHARS = 80
"""How much of an offending input an error message quotes."""


class Judge:
    """Validates tasks and checks answers against one backend.

    >>> judge = Judge(backend)                       # doctest: +SKIP
    >>> (await judge.validate(task)).outputs         # doctest: +SKIP
    ('4',)
    """

    def __init__(self, backend: Backend, *, limits: SandboxLimits | None = None, gate: bool = True) -> None:
        self._backend = backend
        self._limits = limits or SandboxLimits()
        self._gate = gate

    @property
    def limits(self) -> SandboxLimits:
        return self._limits

    async def validate(self, task: Task) -> Validation:
        """Run ``task`` under its hash seeds and return its gold outputs or why it is invalid."""
        try:
            return Validation(await self._gold_outputs(task), None)
        except ExecutorError as failure:
            return Validation(None, failure.error)

    async def check(self, task: Task, answer: str) -> Judgement:
        """Judge ``answer`` to ``task`` against the task's gold outputs."""
        try:
            _require_input_count(task)
            self._screen(task.program)
            if task.type is TaskType.DEDUCTION:
                return self._check_deduction(task, answer)
            if task.type is TaskType.ABDUCTION:
                return await self._check_abduction(task, answer)
            return await self._check_induction(task, answer)
        except ExecutorError as failure:
            return Judgement.invalid(failure.error)

    async def _gold_outputs(self, task: Task) -> tuple[str, ...]:
        _require_input_count(task)
        self._screen(task.program)
        args = _argument_texts(task.inputs)
        slots = task_slots(task.id, task.program, task.inputs)
        runs = await asyncio.gather(*(self._run(task.program, args, slot) for slot in slots))
        _raise_first_error(runs, len(args), task.inputs)
        first, *others = await _off_the_loop_if_large(
            runs, lambda: [_trusted_outputs(run, self._limits) for run in runs]
        )
        for outputs in others:
            for index, (a, b) in enumerate(zip(first, outputs, strict=True)):
                if a != b:
                    raise ExecutorError(
                        ErrorCode.NONDETERMINISTIC,
                        f"input {index} ({_shown(task.inputs[index])}) gives different outputs under "
                        f"different hash seeds: {_cut(a)} vs {_cut(b)}",
                    )
        return first

    def _check_deduction(self, task: Task, answer: str) -> Judgement:
        gold = _gold_values(task, single=True)[0]
        try:
            predicted = parse_value(answer)
        except ValueRejectedError as rejected:
            return Judgement.wrong(_as_bad_answer(rejected))
        return _verdict(values_equal(predicted, gold))

    async def _check_abduction(self, task: Task, answer: str) -> Judgement:
        gold = _gold_values(task, single=True)[0]
        try:
            parse_args(answer)
        except ValueRejectedError as rejected:
            return Judgement.wrong(_as_bad_answer(rejected))
        outcome = await self._run(task.program, (answer,), HashSeedSlot.A)
        if outcome.error is not None:  # the program itself cannot run: the task's fault, not the answer's
            raise ExecutorError(outcome.error.code, outcome.error.message)
        return await _off_the_loop_if_large((outcome,), lambda: self._judge_calls(outcome, (gold,)))

    async def _check_induction(self, task: Task, answer: str) -> Judgement:
        _, held_out = task.induction_split()
        if not held_out:
            raise ExecutorError(
                ErrorCode.BAD_ANSWER, "malformed job: an induction task needs at least two input/output pairs"
            )
        gold = _gold_values(task, single=False)
        args = _argument_texts(tuple(task.inputs[i] for i in held_out))
        if self._gate and (forbidden := check_program(answer)) is not None:
            return Judgement.wrong(forbidden)
        outcome = await self._run(answer, args, HashSeedSlot.A)
        if outcome.error is not None:
            if outcome.error.code is ErrorCode.INFRA_ERROR:
                return Judgement.invalid(outcome.error)
            return Judgement.wrong(outcome.error)  # the answer program does not compile or lacks f
        expected = tuple(gold[i] for i in held_out)
        return await _off_the_loop_if_large((outcome,), lambda: self._judge_calls(outcome, expected))

    def _judge_calls(self, outcome: RunOutcome, gold: Sequence[object]) -> Judgement:
        """Compare each call's output with its gold value; a call error makes the answer wrong."""
        _require_call_count(outcome, len(gold))
        for call, expected in zip(outcome.calls, gold, strict=True):
            if call.error is not None:
                if call.error.code is ErrorCode.INFRA_ERROR:
                    return Judgement.invalid(call.error)
                return Judgement.wrong(call.error)
            try:
                value = parse_value(_output_text(call.output))
            except ValueRejectedError as rejected:
                return Judgement.wrong(_as_unsupported(rejected))
            if not values_equal(value, expected):
                return Judgement.wrong()
        return _verdict(True)

    def _screen(self, program: str) -> None:
        if self._gate and (error := check_program(program)) is not None:
            raise ExecutorError(error.code, error.message)

    async def _run(self, program: str, args: tuple[str, ...], slot: HashSeedSlot) -> RunOutcome:
        return await self._backend.run(RunRequest(program=program, args=args, slot=slot, limits=self._limits))


async def _off_the_loop_if_large(runs: Sequence[RunOutcome], parse: Callable[[], T]) -> T:
    """``parse()`` the outputs of ``runs``: on the event loop when they are small, else in a thread.

    Parsing a legal output near the 1 MiB limit takes about a second of pure Python; on the loop that
    would stall every other job in flight (and their timeouts) for as long.
    """
    size_chars = sum(len(call.output or "") for run in runs for call in run.calls)
    if size_chars <= INLINE_PARSE_CHARS:
        return parse()
    return await asyncio.to_thread(parse)


def _require_input_count(task: Task) -> None:
    if not 0 < len(task.inputs) <= MAX_TASK_INPUTS:
        raise ExecutorError(
            ErrorCode.BAD_ANSWER,
            f"malformed job: a task needs 1 to {MAX_TASK_INPUTS} inputs, this one has {len(task.inputs)}",
        )


def _verdict(correct: bool) -> Judgement:
    return Judgement(ok=True, correct=correct, error=None)


def _argument_texts(inputs: Sequence[str]) -> tuple[str, ...]:
    """Check that each argument list parses as literals, and pass its text on exactly as written.

    The sandbox builds the arguments from this same text, so dict keys and set elements reach ``f`` in
    the order they were written, as a fresh CPython builds them; canonical forms are only for comparing.
    """
    for index, raw in enumerate(inputs):
        try:
            parse_args(raw)
        except ValueRejectedError as rejected:
            raise ExecutorError(
                rejected.error.code, f"input {index} ({_shown(raw)}): {rejected.error.message}"
            ) from None
    return tuple(inputs)


def _gold_values(task: Task, *, single: bool) -> list[object]:
    """The parsed gold outputs of a task being checked; a task without usable gold cannot be judged."""
    if not task.outputs or len(task.outputs) != len(task.inputs):
        raise ExecutorError(
            ErrorCode.BAD_ANSWER,
            f"malformed job: the task has {len(task.inputs)} inputs and {len(task.outputs)} gold outputs; "
            "checking needs one gold output per input (validate the task first)",
        )
    if single and len(task.outputs) != 1:
        raise ExecutorError(
            ErrorCode.BAD_ANSWER,
            f"malformed job: a {task.type.value} check needs exactly one input/output pair, "
            f"got {len(task.outputs)}",
        )
    values = []
    for index, text in enumerate(task.outputs):
        try:
            values.append(parse_value(text))
        except ValueRejectedError as rejected:
            raise ExecutorError(
                ErrorCode.UNSUPPORTED_VALUE, f"gold output {index}: {rejected.error.message}"
            ) from None
    return values


def _raise_first_error(runs: Sequence[RunOutcome], calls: int, inputs: Sequence[str]) -> None:
    """Raise the error that makes a task invalid: an executor failure first, then the program's own."""
    for run in runs:
        if run.error is None:
            _require_call_count(run, calls)
    errors = [run.error for run in runs if run.error is not None]
    errors += [
        ExecError(call.error.code, f"input {index} ({_shown(inputs[index])}): {call.error.message}")
        for run in runs
        if run.error is None
        for index, call in enumerate(run.calls)
        if call.error is not None
    ]
    infra = [error for error in errors if error.code is ErrorCode.INFRA_ERROR]
    if errors:
        first = infra[0] if infra else errors[0]
        raise ExecutorError(first.code, first.message)


def _require_call_count(run: RunOutcome, expected: int) -> None:
    if len(run.calls) != expected:
        raise ExecutorError(
            ErrorCode.INFRA_ERROR, f"backend returned {len(run.calls)} call outcomes for {expected} calls"
        )


def _trusted_outputs(run: RunOutcome, limits: SandboxLimits) -> tuple[str, ...]:
    """Re-parse every output the sandbox returned and render it canonically here, in the parent.

    The output limit is counted in UTF-8 bytes, as the sandbox counts it.
    """
    outputs = []
    for index, call in enumerate(run.calls):
        text = _output_text(call.output)
        size_bytes = len(text.encode("utf-8", "surrogatepass"))
        if size_bytes > limits.output_bytes:
            raise ExecutorError(
                ErrorCode.OUTPUT_LIMIT, f"output {index} has {size_bytes} bytes, over {limits.output_bytes}"
            )
        try:
            outputs.append(canonical(parse_value(text, _output_limits(limits)), _output_limits(limits)))
        except ValueRejectedError as rejected:
            raise ExecutorError(
                _as_unsupported(rejected).code, f"output {index}: {rejected.error.message}"
            ) from None
    return tuple(outputs)


def _output_limits(limits: SandboxLimits) -> ValueLimits:
    """Value caps for an output: as long as the sandbox's output limit allows, never shorter."""
    return ValueLimits(max_text_chars=max(limits.output_bytes, DEFAULT_LIMITS.max_text_chars))


def _output_text(output: str | None) -> str:
    if output is None:
        raise ExecutorError(ErrorCode.INFRA_ERROR, "backend returned a call with neither output nor error")
    return output


def _as_bad_answer(rejected: ValueRejectedError) -> ExecError:
    return ExecError(ErrorCode.BAD_ANSWER, f"the answer is not a supported literal: {rejected.error.message}")


def _as_unsupported(rejected: ValueRejectedError) -> ExecError:
    """A sandbox output that does not parse is an unsupported value, unless it was simply too large."""
    code = (
        ErrorCode.OUTPUT_LIMIT
        if rejected.error.code is ErrorCode.OUTPUT_LIMIT
        else ErrorCode.UNSUPPORTED_VALUE
    )
    return ExecError(code, rejected.error.message)


def _shown(text: str) -> str:
    """Untrusted text quoted for a message: escaped, on one line, cut."""
    return repr(text) if len(text) <= _SHOWN_CHARS else repr(text[:_SHOWN_CHARS]) + "..."


def _cut(canonical_text: str) -> str:
    """A canonical literal (one line already) shortened for a message."""
    return canonical_text if len(canonical_text) <= _SHOWN_CHARS else canonical_text[:_SHOWN_CHARS] + "..."
