"""Any text gets a parse result or a named format error from both roles' parsers, never an exception."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from azr.core.task import ZERO_SEED, Task, TaskType
from azr.proposer.parsing import parse_proposal
from azr.proposer.prompts import ProposalRequest
from azr.roles.config import RolesConfig
from azr.roles.errors import FormatFailure
from azr.solver.parsing import Answer, parse_answer

CONFIGS = [
    RolesConfig(min_induction_inputs=2, max_induction_inputs=32, induction_inputs_shown=1),
    RolesConfig(
        min_induction_inputs=2, max_induction_inputs=32, induction_inputs_shown=1, strict_format=True
    ),
]
PIECES = [
    "<think>",
    "</think>",
    "<answer>",
    "</ANSWER>",
    "```",
    "````",
    "```python",
    "```py",
    "```input",
    "```output",
    "```message",
    "\n",
    "\r\n",
    "\r",
    "  ",
    "User:",
    "def f(x):\n    return x",
    "[1, 2], 3",
    "{'b': 1, 'a': 2}",
    "4```",
    "```output 4",
    "é\x00",
]
TEXT = st.lists(st.sampled_from(PIECES), max_size=12).map("".join)
BLOCK = st.builds(
    "```{}\n{}\n```\n".format,
    st.sampled_from(["python", "Py", "input", "input", "output", "message", "", "json"]),
    TEXT,
)
SHAPED = st.builds(
    "{}</think>{}<answer>\n{}{}".format,
    TEXT,
    TEXT,
    st.lists(BLOCK, max_size=14).map("".join),
    st.sampled_from(["</answer>", "", "</answer>\nUser: more", "```"]),
)
COMPLETIONS = st.one_of(st.lists(st.sampled_from(PIECES), max_size=40).map("".join), SHAPED, st.none())
REQUESTS = [ProposalRequest(t, (ZERO_SEED,)) for t in TaskType]


@settings(max_examples=300)
@given(COMPLETIONS, st.booleans(), st.sampled_from(CONFIGS))
def test_parsers_always_return_a_result(
    completion: str | None, stopped_by_length: bool, config: RolesConfig
) -> None:
    for request in REQUESTS:
        proposal = parse_proposal(completion, request, config, stopped_by_length=stopped_by_length)
        assert isinstance(proposal, Task | FormatFailure)
        if isinstance(proposal, Task):
            assert proposal.type is request.type and proposal.inputs and not proposal.outputs
    for task_type in TaskType:
        answer = parse_answer(completion, task_type, config, stopped_by_length=stopped_by_length)
        assert isinstance(answer, Answer | FormatFailure)
        if isinstance(answer, Answer):
            assert answer.text.strip()
