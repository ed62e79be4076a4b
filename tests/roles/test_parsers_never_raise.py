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

CONFIG = RolesConfig(min_induction_inputs=2)
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
    "<a program defining f>",
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
COMPLETIONS = st.one_of(st.lists(st.sampled_from(PIECES), max_size=40).map("".join), SHAPED)
REQUESTS = [ProposalRequest(t, (ZERO_SEED,)) for t in TaskType]


@settings(max_examples=300)
@given(COMPLETIONS, st.booleans())
def test_parsers_always_return_a_result(completion: str, stopped_by_length: bool) -> None:
    for request in REQUESTS:
        proposal = parse_proposal(completion, request, CONFIG, stopped_by_length=stopped_by_length)
        assert isinstance(proposal, Task | FormatFailure)
        if isinstance(proposal, Task):
            assert proposal.type is request.type and proposal.inputs and not proposal.outputs
    for task_type in TaskType:
        answer = parse_answer(completion, task_type, CONFIG, stopped_by_length=stopped_by_length)
        assert isinstance(answer, Answer | FormatFailure)
        if isinstance(answer, Answer):
            assert answer.text.strip()
