"""Chat and base renderings of a prompt, in both templates; the paper's through a real chat template."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from azr.core.task import ZERO_SEED, TaskType
from azr.proposer.prompts import ProposalRequest, proposer_prompt
from azr.roles.config import RolesConfig
from azr.roles.templates import FORMAT_RULE, R1_TEMPLATE, TEMPLATE_VERSION, Prompt, program_rules
from azr.solver.prompts import solver_prompt

R1_VERBATIM = (
    "A conversation between User and Assistant. The user asks a question, and the Assistant solves it. The "
    "assistant first thinks about the reasoning process in the mind and then provides the user with the "
    "answer. The reasoning process and answer are enclosed within <think> </think> and <answer> </answer> "
    "tags, respectively, i.e., <think> reasoning process here </think> <answer> answer here </answer>. "
    "User: {}\nAssistant: <think>"
)
"""The reference code's ``instruction_following`` string, copied here once more so that an edit to the
template cannot pass unnoticed."""

QWEN25_CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    "<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if not (message.role == 'system' and loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""The Qwen2.5 instruct chat template without its tool-calling branches (the paper's models)."""


def test_chat_form_is_a_system_and_a_user_message() -> None:
    prompt = Prompt("## Task: x")
    assert prompt.as_chat() == [
        {"role": "system", "content": FORMAT_RULE},
        {"role": "user", "content": "## Task: x"},
    ]
    assert prompt.version == TEMPLATE_VERSION


def test_base_form_ends_inside_an_opened_think_tag() -> None:
    text = Prompt("## Task: x").as_base()
    assert text.startswith("A conversation between User and Assistant.")
    assert "<think> </think>" in text and "<answer> </answer>" in text
    assert text.endswith("\nUser: ## Task: x\nAssistant: <think>")


def test_paper_template_is_the_r1_template_verbatim() -> None:
    assert R1_TEMPLATE == R1_VERBATIM
    prompt = Prompt("## Task: x", template="paper")
    assert prompt.as_base() == R1_VERBATIM.format("## Task: x")
    assert prompt.as_chat() == [{"role": "user", "content": R1_VERBATIM.format("## Task: x")}]


def test_roles_use_the_configured_template() -> None:
    config = RolesConfig(template="paper")
    request = ProposalRequest(TaskType.DEDUCTION, (ZERO_SEED,))
    assert proposer_prompt(request, config).template == "paper"
    assert solver_prompt(ZERO_SEED, config).template == "paper"
    assert solver_prompt(ZERO_SEED, RolesConfig()).template == "azr"


@pytest.fixture(scope="module")
def tiny_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    transformers = pytest.importorskip("transformers")
    from azr.trainer.tiny import build_tiny_model

    directory: Path = build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")
    yield transformers.AutoTokenizer.from_pretrained(directory)


def test_paper_prompt_through_real_chat_templates(tiny_tokenizer: object) -> None:
    """What the sampler gets for the paper template: the R1 text as the one user turn, then the
    assistant's turn opened; Qwen2.5's template adds its default system message, as in the paper's runs."""
    body = solver_prompt(ZERO_SEED, RolesConfig(template="paper")).body
    messages = Prompt(body, template="paper").as_chat()
    user_turn = R1_VERBATIM.format(body)

    rendered = tiny_tokenizer.apply_chat_template(  # type: ignore[attr-defined]
        messages, tokenize=False, add_generation_prompt=True
    )
    assert rendered == f"<|im_start|>user\n{user_turn}<|im_end|>\n<|im_start|>assistant\n"

    qwen = tiny_tokenizer.apply_chat_template(  # type: ignore[attr-defined]
        messages, tokenize=False, add_generation_prompt=True, chat_template=QWEN25_CHAT_TEMPLATE
    )
    assert qwen == (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
        f"<|im_start|>user\n{user_turn}<|im_end|>\n<|im_start|>assistant\n"
    )


def test_program_rules_name_the_allowed_imports_and_the_time_limit() -> None:
    assert "math, re" in program_rules(["math", "re"], 5.0)[1]
    assert "may not import anything" in program_rules([], 5.0)[1]
    assert any("within 2.5 seconds" in rule for rule in program_rules([], 2.5))
