"""The tiny preset's model and tokenizer: deterministic, loadable by the Auto classes, lossless on code."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from azr.services.settings import resolve
from azr.trainer import tiny
from azr.trainer.tiny import FORMAT_TOKENS, IM_END, IM_START, TinySpec, build_tiny_model


def digests(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


def test_build_is_deterministic_and_cached(tmp_path: Path, tiny_model_dir: Path) -> None:
    other = build_tiny_model(tmp_path / "again")
    assert digests(other) == digests(tiny_model_dir)
    weights = other / "model.safetensors"
    before = weights.stat().st_mtime_ns
    assert build_tiny_model(other) == other
    assert weights.stat().st_mtime_ns == before, "a matching build must be reused, not rewritten"


def test_another_size_builds_beside_the_default_and_leaves_it_alone(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    default_dir = tiny.tiny_model_dir(tmp_path, TinySpec())
    assert default_dir == tmp_path / "models" / "tiny"
    build_tiny_model(default_dir)
    before = digests(default_dir)

    narrow = TinySpec(hidden_size=64, intermediate_size=128, num_attention_heads=2, num_key_value_heads=1)
    built = build_tiny_model(tiny.tiny_model_dir(tmp_path, narrow), narrow)

    assert built.name == "tiny-hidden_size64-intermediate_size128-num_attention_heads2-num_key_value_heads1"
    assert AutoModelForCausalLM.from_pretrained(built).config.hidden_size == 64
    assert digests(default_dir) == before == digests(tiny_model_dir)


@pytest.mark.parametrize(
    ("sizes", "refusal"),
    [
        ({"hidden_size": 250}, "hidden_size 250 is not a multiple of num_attention_heads 4"),
        ({"num_attention_heads": 4, "num_key_value_heads": 3}, "not a multiple of num_key_value_heads 3"),
        ({"num_hidden_layers": 0}, "must be positive: num_hidden_layers"),
        ({"num_attention_heads": 0}, "must be positive: num_attention_heads"),
    ],
)
def test_a_run_refuses_sizes_the_model_cannot_have(sizes: dict[str, int], refusal: str) -> None:
    with pytest.raises(ValueError, match=refusal):
        resolve("tiny", {"warm_start": {"tiny": sizes}})


def test_loads_through_auto_classes(tiny_model_dir: Path) -> None:
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    n_params = sum(p.numel() for p in model.parameters())
    assert 1_000_000 < n_params < 10_000_000
    assert model.config.model_type == "qwen2"
    assert model.config.vocab_size == len(tok)
    assert model.config.eos_token_id == tok.convert_tokens_to_ids(IM_END)
    ids = torch.tensor([tok.encode("def f(x):\n    return x")])
    assert model(input_ids=ids).logits.shape == (1, ids.shape[1], len(tok))


CODE_SAMPLES = [
    "def f(x):\n    return x",
    "def f(s: str) -> dict:\n\tcounts = {}\n\tfor ch in s:\n"
    "\t\tcounts[ch] = counts.get(ch, 0) + 1\n\treturn counts\n",
    'def f(a, b=\'q\', *args, **kw):\n    """Doc with "quotes" and \\\\ backslashes."""\n'
    "    return [a, b, args, kw]\n",
    "x = {'ünïcödé': '✓', 'emoji': '🐍', 'cjk': '漢字'}\nprint(f\"{x!r:>10}\")\n",
    "   leading spaces\n\n\ntrailing spaces   \n\r\nwindows line\r\n",
    "<think>reason about f</think> <answer>[1, 2], 3</answer>",
    "lambda n: n ** 2 if n % 2 else -n // 3 & 0xFF | 0b101 ^ ~7",
]


@pytest.mark.parametrize("text", CODE_SAMPLES)
def test_tokenizer_round_trips_code(tiny_model_dir: Path, text: str) -> None:
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    ids = tok.encode(text, add_special_tokens=False)
    assert tok.decode(ids) == text
    assert all(0 <= i < len(tok) for i in ids)


def test_special_and_format_tokens_are_single_tokens(tiny_model_dir: Path) -> None:
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    for token in (IM_START, IM_END, *FORMAT_TOKENS):
        assert len(tok.encode(token, add_special_tokens=False)) == 1, token
    assert tok.pad_token_id is not None and tok.pad_token_id != tok.eos_token_id


def test_chat_template(tiny_model_dir: Path) -> None:
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    text = tok.apply_chat_template(
        [{"role": "user", "content": "Predict the output."}], tokenize=False, add_generation_prompt=True
    )
    assert text == "<|im_start|>user\nPredict the output.<|im_end|>\n<|im_start|>assistant\n"
