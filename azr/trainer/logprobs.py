"""Per-token log-probabilities and entropies of a causal language model.

Temperature: the rollout engine samples from softmax(z / T) and records the log-probs of that tempered
distribution as the behaviour log-probs. The trainer must score with the same T (``temperature=`` below):
with any other T the PPO ratio pi / pi_old is not 1 even on-policy, and every token looks off-policy.
The entropy bonus is likewise the entropy of the tempered distribution, the one actually sampled.

Precision: the LM head runs in float32 (``Float32LMHead``) even when the model computes in bfloat16: a
bf16 logit carries ~3 significant digits, so bf16 log-probs of the same weights differ by ~1e-2 between
the sampler and the trainer, which the PPO ratio reads as an off-policy move.

Memory: logits are (tokens, V) and V is large (~152k for Qwen). Three things bound them:

1. only the positions that predict a scored (response) token go through the LM head, so the logits cover
   the response and not the prompt (``score_mask``);
2. log-probs are z_label - logsumexp(z), which never materialises a full log-softmax tensor;
3. log-probs and entropies are computed ``chunk_tokens`` rows at a time, each chunk under activation
   checkpointing when a gradient is needed, so no (tokens, V) float32 working copy is kept for backward.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import cast

import torch
import torch.nn.functional as F  # noqa: N812 (the usual alias)
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

DEFAULT_CHUNK_TOKENS = 4096
ChunkFn = Callable[[Tensor, Tensor | None, float], Tensor]


class Float32LMHead(nn.Module):
    """The model's LM head computed in float32, optionally on selected positions only.

    It owns the original head's parameters (the same ``Parameter`` objects, so tied embeddings stay tied
    and ZeRO-3 gathers them for this module's forward). While ``selecting(keep)`` is active, the hidden
    states (N, L, H) are reduced to the rows ``keep`` (N, L) marks before the matmul, and the model's
    ``logits`` come out as (M, V) for those M positions.
    """

    def __init__(self, head: nn.Linear) -> None:
        super().__init__()
        self.weight = head.weight
        self.bias = head.bias
        self.in_features, self.out_features = head.in_features, head.out_features
        self._keep: Tensor | None = None

    def forward(self, hidden: Tensor) -> Tensor:
        if self._keep is not None:
            hidden = hidden[self._keep]  # (M, H)
        with torch.autocast(device_type=hidden.device.type, enabled=False):
            bias = None if self.bias is None else self.bias.float()
            return F.linear(hidden.float(), self.weight.float(), bias)  # (M, V) or (N, L, V)

    @contextmanager
    def selecting(self, keep: Tensor) -> Iterator[None]:
        """Compute the logits of the positions ``keep`` (N, L) marks only, for the duration."""
        self._keep = keep
        try:
            yield
        finally:
            self._keep = None


def install_float32_head(model: nn.Module) -> None:
    """Replace a Hugging Face model's linear LM head by a ``Float32LMHead`` over the same parameters."""
    head = model.get_output_embeddings()  # type: ignore[operator]
    if isinstance(head, nn.Linear):
        model.set_output_embeddings(Float32LMHead(head))  # type: ignore[operator]


def token_logprobs(
    logits: Tensor, labels: Tensor, *, temperature: float = 1.0, chunk_tokens: int = DEFAULT_CHUNK_TOKENS
) -> Tensor:
    """log softmax(logits / temperature)[label] per position: (..., V), (...) -> (...), >= float32."""
    _check_logits(logits, temperature, chunk_tokens)
    if labels.shape != logits.shape[:-1]:
        raise ValueError(f"labels {tuple(labels.shape)} must be logits {tuple(logits.shape)} without V")
    flat, y = logits.reshape(-1, logits.shape[-1]), labels.reshape(-1, 1).long()  # (M, V), (M, 1)
    out = [_chunked(_label_logprob, z, yc, temperature) for z, yc in _split(flat, y, chunk_tokens)]
    return torch.cat(out).reshape(labels.shape)


def entropy_from_logits(
    logits: Tensor, *, temperature: float = 1.0, chunk_tokens: int = DEFAULT_CHUNK_TOKENS
) -> Tensor:
    """H(softmax(logits / temperature)) per position in nats: (..., V) -> (...), >= float32."""
    _check_logits(logits, temperature, chunk_tokens)
    flat = logits.reshape(-1, logits.shape[-1])  # (M, V)
    out = [_chunked(_entropy, z, None, temperature) for z, _ in _split(flat, None, chunk_tokens)]
    return torch.cat(out).reshape(logits.shape[:-1])


def sequence_logprobs(
    model: nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor,
    *,
    temperature: float = 1.0,
    with_entropy: bool,
    score_mask: Tensor | None = None,
) -> tuple[Tensor, Tensor | None]:
    """Score whole sequences: log p(x_t | x_<t) for every token, aligned with ``input_ids``.

    Returns (N, L) log-probs and, if asked, (N, L) entropies of the distribution that predicted each
    token. Column t holds the score of ``input_ids[:, t]``; it is 0 at t = 0, at padding, at the first
    real token of a left-padded row (nothing real precedes it) and, with ``score_mask`` (N, L), wherever
    the mask is 0: only the positions that predict a masked-in token go through the LM head when the
    model carries a ``Float32LMHead``. Left and right padding give the same numbers for the same
    sequence: positions come from the attention mask (cumsum - 1), not from the column index.
    """
    if input_ids.shape != attention_mask.shape or input_ids.dim() != 2:
        raise ValueError(
            f"input_ids {tuple(input_ids.shape)} and attention_mask {tuple(attention_mask.shape)} must "
            "both be (N, L)"
        )
    position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)  # (N, L)
    scored = (attention_mask[:, 1:] * attention_mask[:, :-1]).bool()  # (N, L-1) token and context real
    if score_mask is not None:
        scored &= score_mask[:, 1:].bool()
    head = lm_head_of(model)
    keep = F.pad(scored, (0, 1))  # (N, L) the logits at t predict token t+1
    with head.selecting(keep) if head is not None else nullcontext():
        logits = model(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
        ).logits  # (M, V) with a selecting head, else (N, L, V)
    if head is None:
        logits = logits[:, :-1][scored]  # (M, V)
    labels = input_ids[:, 1:][scored]  # (M,)
    logprobs = _scatter(token_logprobs(logits, labels, temperature=temperature), scored)  # (N, L)
    if not with_entropy:
        return logprobs, None
    return logprobs, _scatter(entropy_from_logits(logits, temperature=temperature), scored)  # (N, L)


def lm_head_of(model: nn.Module) -> Float32LMHead | None:
    """The ``Float32LMHead`` of a model, or of the model a DDP or DeepSpeed engine wraps; else None."""
    inner = model
    while hasattr(inner, "module") and isinstance(inner.module, nn.Module):
        inner = inner.module
    get = getattr(inner, "get_output_embeddings", None)
    head = get() if callable(get) else None
    return head if isinstance(head, Float32LMHead) else None


def _scatter(values: Tensor, scored: Tensor) -> Tensor:
    """(M,) values of the scored positions of (N, L-1) into (N, L), column t scoring token t."""
    out = torch.zeros(scored.shape, dtype=values.dtype, device=values.device)  # (N, L-1)
    out = out.masked_scatter(scored, values)
    return F.pad(out, (1, 0))  # (N, L)


def _label_logprob(z: Tensor, y: Tensor | None, temperature: float) -> Tensor:
    z = _upcast(z) / temperature  # (m, V)
    assert y is not None
    return z.gather(-1, y).squeeze(-1) - torch.logsumexp(z, dim=-1)  # (m,)


def _entropy(z: Tensor, _: Tensor | None, temperature: float) -> Tensor:
    log_p = torch.log_softmax(_upcast(z) / temperature, dim=-1)  # (m, V)
    return -(log_p.exp() * log_p).sum(-1)  # (m,) no cancellation, unlike log Z - E_p[z]


def _chunked(fn: ChunkFn, z: Tensor, y: Tensor | None, temperature: float) -> Tensor:
    """``fn`` on one chunk; under autograd it is recomputed in backward instead of keeping (m, V) copies."""
    if z.requires_grad and torch.is_grad_enabled():
        return cast(Tensor, checkpoint(fn, z, y, temperature, use_reentrant=False))
    return fn(z, y, temperature)


def _split(z: Tensor, y: Tensor | None, chunk: int) -> Iterator[tuple[Tensor, Tensor | None]]:
    for start in range(0, max(z.shape[0], 1), chunk):
        yield z[start : start + chunk], None if y is None else y[start : start + chunk]


def _upcast(logits: Tensor) -> Tensor:
    """Half-precision logits to float32; float32 and float64 stay as they are."""
    return logits.to(torch.promote_types(logits.dtype, torch.float32))


def _check_logits(logits: Tensor, temperature: float, chunk_tokens: int) -> None:
    if logits.dim() < 2:
        raise ValueError(f"logits must be (..., V), got shape {tuple(logits.shape)}")
    if not temperature > 0:
        raise ValueError(
            f"temperature must be > 0 (the sampling temperature of the rollouts), got {temperature}"
        )
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
