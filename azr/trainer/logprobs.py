"""Per-token log-probabilities and entropies of a causal language model.

Temperature: the rollout engine samples from softmax(z / T) and records the log-probs of that tempered
distribution as the behaviour log-probs. The trainer must score with the same T (``temperature=`` below):
with any other T the PPO ratio pi / pi_old is not 1 even on-policy, and every token looks off-policy.
The entropy bonus is likewise the entropy of the tempered distribution, the one actually sampled.

Memory: logits are (N, L, V) and V is large (~150k for Qwen). Log-probs are computed as
z_label - logsumexp(z), which never materialises a full log-softmax tensor, in float32 (float64 stays
float64) for accuracy, and chunked over rows so that the float32 working copy is bounded by
``chunk_rows`` rows at a time in the forward pass (autograd still keeps each chunk's float32 copy for the
backward pass when the logits need grad).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

DEFAULT_CHUNK_ROWS = 4


def token_logprobs(
    logits: Tensor, labels: Tensor, *, temperature: float = 1.0, chunk_rows: int = DEFAULT_CHUNK_ROWS
) -> Tensor:
    """log softmax(logits / temperature)[label] per position: (N, L, V), (N, L) -> (N, L), >= float32."""
    _check_logits(logits, temperature, chunk_rows)
    if labels.shape != logits.shape[:-1]:
        raise ValueError(f"labels {tuple(labels.shape)} must be logits {tuple(logits.shape)} without V")
    out = []
    for chunk, y in zip(torch.split(logits, chunk_rows), torch.split(labels, chunk_rows), strict=True):
        z = _upcast(chunk) / temperature  # (n, L, V)
        z_label = z.gather(-1, y.long().unsqueeze(-1)).squeeze(-1)  # (n, L)
        out.append(z_label - torch.logsumexp(z, dim=-1))  # (n, L)
    return torch.cat(out)  # (N, L)


def entropy_from_logits(
    logits: Tensor, *, temperature: float = 1.0, chunk_rows: int = DEFAULT_CHUNK_ROWS
) -> Tensor:
    """H(softmax(logits / temperature)) per position in nats: (N, L, V) -> (N, L), >= float32."""
    _check_logits(logits, temperature, chunk_rows)
    out = []
    for chunk in torch.split(logits, chunk_rows):
        log_p = torch.log_softmax(_upcast(chunk) / temperature, dim=-1)  # (n, L, V)
        out.append(-(log_p.exp() * log_p).sum(-1))  # (n, L) no cancellation, unlike log Z - E_p[z]
    return torch.cat(out)  # (N, L)


def sequence_logprobs(
    model: nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor,
    *,
    temperature: float = 1.0,
    with_entropy: bool,
) -> tuple[Tensor, Tensor | None]:
    """Score whole sequences: log p(x_t | x_<t) for every token, aligned with ``input_ids``.

    Returns (N, L) log-probs and, if asked, (N, L) entropies of the distribution that predicted each
    token. Column t holds the score of ``input_ids[:, t]``; it is 0 at t = 0, at padding, and at the
    first real token of a left-padded row (nothing real precedes it). Left and right padding give the
    same numbers for the same sequence: positions come from the attention mask (cumsum - 1), not from
    the column index.
    """
    if input_ids.shape != attention_mask.shape or input_ids.dim() != 2:
        raise ValueError(
            f"input_ids {tuple(input_ids.shape)} and attention_mask {tuple(attention_mask.shape)} must "
            "both be (N, L)"
        )
    position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)  # (N, L)
    logits = model(
        input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
    ).logits[:, :-1]  # (N, L-1, V) logits at t predict token t+1
    scored = (attention_mask[:, 1:] * attention_mask[:, :-1]).bool()  # (N, L-1) token and context real
    logprobs = token_logprobs(logits, input_ids[:, 1:], temperature=temperature)  # (N, L-1)
    logprobs = _align(torch.where(scored, logprobs, 0.0))  # (N, L)
    if not with_entropy:
        return logprobs, None
    entropy = entropy_from_logits(logits, temperature=temperature)  # (N, L-1)
    return logprobs, _align(torch.where(scored, entropy, 0.0))  # (N, L)


def _align(x: Tensor) -> Tensor:
    """Prepend a zero column so that column t scores token t: (N, L-1) -> (N, L)."""
    return torch.nn.functional.pad(x, (1, 0))


def _upcast(logits: Tensor) -> Tensor:
    """Half-precision logits to float32; float32 and float64 stay as they are."""
    return logits.to(torch.promote_types(logits.dtype, torch.float32))


def _check_logits(logits: Tensor, temperature: float, chunk_rows: int) -> None:
    if logits.dim() != 3:
        raise ValueError(f"logits must be (N, L, V), got shape {tuple(logits.shape)}")
    if not temperature > 0:
        raise ValueError(
            f"temperature must be > 0 (the sampling temperature of the rollouts), got {temperature}"
        )
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
