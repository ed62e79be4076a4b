"""Chat and base renderings of a prompt."""

from __future__ import annotations

from azr.roles.templates import FORMAT_RULE, TEMPLATE_VERSION, Prompt, program_rules


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


def test_program_rules_name_the_allowed_imports_or_forbid_imports() -> None:
    assert "math, re" in program_rules(["math", "re"])[1]
    assert "may not import anything" in program_rules([])[1]
