"""Log-probs and entropies: naive loops, and real tiny Qwen2 and GPT-2 models with left and right padding."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Qwen2Config, Qwen2ForCausalLM

from azr.trainer.logprobs import entropy_from_logits, sequence_logprobs, token_logprobs

TEMPERATURE = 0.7


@pytest.mark.parametrize("chunk_tokens", [1, 3, 100])
@pytest.mark.parametrize("temperature", [1.0, TEMPERATURE])
def test_token_logprobs_and_entropy_match_naive_loops(chunk_tokens: int, temperature: float) -> None:
    g = torch.Generator().manual_seed(0)
    logits = 3 * torch.randn(5, 4, 11, generator=g, dtype=torch.float64)
    labels = torch.randint(11, (5, 4), generator=g)
    logprobs = token_logprobs(logits, labels, temperature=temperature, chunk_tokens=chunk_tokens)
    entropy = entropy_from_logits(logits, temperature=temperature, chunk_tokens=chunk_tokens)
    for n in range(5):
        for t in range(4):
            z = [x / temperature for x in logits[n, t].tolist()]
            log_z = math.log(sum(math.exp(x) for x in z))
            assert logprobs[n, t].item() == pytest.approx(z[int(labels[n, t])] - log_z, abs=1e-6)
            p = [math.exp(x - log_z) for x in z]
            assert entropy[n, t].item() == pytest.approx(-sum(q * math.log(q) for q in p), abs=1e-6)


def test_bf16_logits_are_scored_in_float32() -> None:
    g = torch.Generator().manual_seed(1)
    logits = 4 * torch.randn(2, 3, 1000, generator=g)
    labels = torch.randint(1000, (2, 3), generator=g)
    half = logits.bfloat16()
    got = token_logprobs(half, labels)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, token_logprobs(half.float(), labels), rtol=0, atol=0)
    assert entropy_from_logits(half).dtype == torch.float32


def test_gradient_flows_through_token_logprobs() -> None:
    logits = torch.randn(2, 3, 7, requires_grad=True)
    labels = torch.randint(7, (2, 3))
    torch.autograd.backward(token_logprobs(logits, labels, chunk_tokens=1).sum())
    assert logits.grad is not None
    expected = torch.nn.functional.one_hot(labels, 7) - torch.softmax(logits.detach(), -1)  # d log p_y / dz
    torch.testing.assert_close(logits.grad, expected)


def tiny_gpt2() -> GPT2LMHeadModel:
    """A randomly initialised GPT-2: learned absolute positions, so wrong position ids change the scores.

    (Qwen2's rotary embedding is invariant to a shift of all positions, so it cannot tell.)
    """
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=64, initializer_range=0.3)
    model = GPT2LMHeadModel(config)
    model.train(False)
    return model


def tiny_qwen2(attn: str) -> Qwen2ForCausalLM:
    """A randomly initialised Qwen2 (no download); a wide init makes the next-token distribution peaked."""
    torch.manual_seed(0)
    options: dict[str, Any] = {"attn_implementation": attn, "initializer_range": 0.3}
    config = Qwen2Config(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, **options,
    )  # fmt: skip
    model = Qwen2ForCausalLM(config)
    model.train(False)
    return model


SEQUENCES = [[5, 17, 99, 3, 42, 8, 61], [7, 7, 120], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [64]]


def pad(sequences: list[list[int]], side: str, pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, sequences))
    ids = torch.full((len(sequences), width), pad_id)
    mask = torch.zeros(len(sequences), width, dtype=torch.long)
    for i, seq in enumerate(sequences):
        cols = slice(0, len(seq)) if side == "right" else slice(width - len(seq), width)
        ids[i, cols], mask[i, cols] = torch.tensor(seq), 1
    return ids, mask


@pytest.mark.parametrize("kind", ["qwen2-eager", "qwen2-sdpa", "gpt2"])
def test_left_and_right_padding_give_the_same_scores(kind: str) -> None:
    model = tiny_gpt2() if kind == "gpt2" else tiny_qwen2(kind.removeprefix("qwen2-"))
    scores = {}
    with torch.no_grad():
        for side in ("left", "right"):
            ids, mask = pad(SEQUENCES, side)
            logprobs, entropy = sequence_logprobs(
                model, ids, mask, temperature=TEMPERATURE, with_entropy=True
            )
            assert entropy is not None
            assert torch.all(logprobs[mask == 0] == 0) and torch.all(entropy[mask == 0] == 0)
            scores[side] = [
                (logprobs[i][mask[i] == 1], entropy[i][mask[i] == 1]) for i in range(len(SEQUENCES))
            ]
        # Unpadded, one sequence at a time: the ground truth.
        for i, seq in enumerate(SEQUENCES):
            ids = torch.tensor([seq])
            alone, alone_entropy = sequence_logprobs(
                model, ids, torch.ones_like(ids), temperature=TEMPERATURE, with_entropy=True
            )
            assert alone_entropy is not None
            assert alone[0, 0] == 0  # the first token has no context
            for side in ("left", "right"):
                torch.testing.assert_close(scores[side][i][0], alone[0], rtol=1e-5, atol=1e-5)
                torch.testing.assert_close(scores[side][i][1], alone_entropy[0], rtol=1e-5, atol=1e-5)
        assert scores["left"][0][0][1:].abs().min() > 0.1  # real scores, not zeros: the check can fail


def test_scores_match_the_sampler_at_its_temperature() -> None:
    """Log-probs that ``generate`` samples with at temperature T are reproduced by scoring at T (ratio 1)."""
    model = tiny_qwen2("sdpa")
    prompts = [[5, 17, 99], [7, 7, 120, 3, 9], [64]]
    ids, mask = pad(prompts, "left")
    torch.manual_seed(1)
    with torch.no_grad():
        out = model.generate(
            input_ids=ids, attention_mask=mask, do_sample=True, temperature=TEMPERATURE, top_k=0, top_p=1.0,
            max_new_tokens=8, output_scores=True, return_dict_in_generate=True, pad_token_id=0,
        )  # fmt: skip
    P = ids.shape[1]
    response = out.sequences[:, P:]  # (N, R)
    step_logprobs = torch.stack([torch.log_softmax(s.float(), -1) for s in out.scores], 1)  # (N, R, V)
    behaviour = step_logprobs.gather(-1, response.unsqueeze(-1)).squeeze(-1)  # (N, R)
    behaviour_entropy = -(step_logprobs.exp() * step_logprobs).sum(-1)  # (N, R)
    full_mask = torch.cat([mask, torch.ones_like(response)], 1)
    with torch.no_grad():
        logprobs, entropy = sequence_logprobs(
            model, out.sequences, full_mask, temperature=TEMPERATURE, with_entropy=True
        )
        at_one, _ = sequence_logprobs(model, out.sequences, full_mask, temperature=1.0, with_entropy=False)
    assert entropy is not None
    torch.testing.assert_close(logprobs[:, P:], behaviour, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(entropy[:, P:], behaviour_entropy, rtol=1e-4, atol=1e-4)
    ratio_at_one = (at_one[:, P:] - behaviour).exp()
    assert (ratio_at_one - 1).abs().max() > 0.05  # scoring at the wrong temperature is visibly off-policy


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: token_logprobs(torch.zeros(2, 3, 4), torch.zeros(2, 4, dtype=torch.long)), "labels"),
        (lambda: token_logprobs(torch.zeros(4), torch.zeros((), dtype=torch.long)), r"\(\.\.\., V\)"),
        (lambda: entropy_from_logits(torch.zeros(1, 2, 3), temperature=0.0), "temperature must be > 0"),
        (lambda: entropy_from_logits(torch.zeros(1, 2, 3), chunk_tokens=0), "chunk_tokens"),
        (
            lambda: sequence_logprobs(
                torch.nn.Identity(), torch.zeros(2, 3), torch.zeros(2, 4), with_entropy=False
            ),
            "both be",
        ),
    ],
)
def test_bad_input_is_rejected(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()
