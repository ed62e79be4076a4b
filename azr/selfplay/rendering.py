"""Prompts as token ids: a role's ``Prompt`` rendered with the policy's tokenizer."""

from __future__ import annotations

from transformers import PreTrainedTokenizerBase

from azr.roles.templates import Prompt
from azr.selfplay.config import PromptFormat


class PromptRenderer:
    """Renders prompts the way the policy reads them: through its chat template, or as plain text."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, prompt_format: PromptFormat) -> None:
        if prompt_format == "chat" and not tokenizer.chat_template:
            raise ValueError(
                "prompt_format is 'chat' but the tokenizer has no chat template: use prompt_format='base' "
                "for a base model"
            )
        self.tokenizer = tokenizer
        self.prompt_format = prompt_format

    def text(self, prompt: Prompt) -> str:
        if self.prompt_format == "base":
            return prompt.as_base()
        rendered = self.tokenizer.apply_chat_template(
            [{"role": m["role"], "content": m["content"]} for m in prompt.as_chat()],
            tokenize=False,
            add_generation_prompt=True,
        )
        if not isinstance(rendered, str):
            raise TypeError(f"the chat template rendered {type(rendered).__name__}, not text")
        return rendered

    def completion_ids(self, text: str) -> list[int]:
        """A completion the policy did not write (a demonstration) as the token ids it would sample:
        the text's tokens, then the end-of-sequence token that ends generation."""
        eos = self.tokenizer.eos_token_id
        if eos is None:
            raise ValueError("the tokenizer names no end-of-sequence token: a completion could never end")
        return [int(i) for i in self.tokenizer(text, add_special_tokens=False)["input_ids"]] + [int(eos)]

    def __call__(self, prompt: Prompt) -> list[int]:
        """The prompt's token ids (the chat template already holds any special tokens it needs)."""
        ids = self.tokenizer(self.text(prompt), add_special_tokens=self.prompt_format == "base")["input_ids"]
        return [int(i) for i in ids]
