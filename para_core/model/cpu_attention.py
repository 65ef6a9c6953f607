"""Attention for the fast path on a CPU in bf16: a few heads at a time, each as two bf16 matrix products.

Why: torch's CPU ``scaled_dot_product_attention`` (its flash kernel) computes in fp32 whatever the input precision,
so in bf16 the backbone's attention costs what it costs in fp32, while a CPU with AVX512_BF16 / AMX multiplies bf16
matrices several times faster than fp32 ones (``para_core.model.hardware``). At the paper config's shape this halves
the attention's time (measured: docs/benchmarks.md, "CPU attention"). Materialising all scores at once is slower than
both (the scores go through memory), so the scores are made for :func:`heads_per_block` heads at a time, a block
small enough to stay in cache.

Precision: the scores and the softmax's reductions are exact to bf16 inputs (softmax accumulates in fp32); the
probabilities are rounded to bf16 before the product with the values, so outputs differ from the fp32 reference by
about bf16's resolution, which is the precision the network runs at. In fp32 torch's kernel is the faster one, so
this is for bf16 / fp16 only.

It is registered with transformers' ``AttentionInterface`` as :data:`NAME` for the transformers backbones, called
directly by ``para_core.model.dinov3_vit``, and selected per backbone with ``Backbone.set_attention(NAME)``; anything
it does not cover (an attention mask, dropout, causal attention, gradients) goes to SDPA unchanged.
"""

from __future__ import annotations

import torch

NAME = "para_cpu_blocked"
SCORE_BLOCK_BYTES = 4 * 2**20  # scores of one block of heads: about an L2 cache (4 MiB)


def heads_per_block(n_queries: int, n_keys: int, element_bytes: int, n_heads: int) -> int:
    """How many heads' scores (n_queries x n_keys each) fit in :data:`SCORE_BLOCK_BYTES` (at least 1, at most all)."""
    per_head = max(1, n_queries * n_keys * element_bytes)
    return max(1, min(n_heads, SCORE_BLOCK_BYTES // per_head))


def blocked_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scaling: float) -> torch.Tensor:
    """softmax(q k^T * scaling) v, block of heads by block of heads.

    :param query: (B, H, Nq, D); ``key``, ``value``: (B, H, Nk, D), the same dtype.
    :returns: (B, H, Nq, D) in that dtype.
    """
    B, H, Nq, D = query.shape
    Nk = key.shape[2]
    out = torch.empty((B, H, Nq, value.shape[-1]), dtype=query.dtype, device=query.device)  # (B, H, Nq, Dv)
    step = heads_per_block(Nq, Nk, query.element_size(), H)
    key_t = key.transpose(-1, -2)  # (B, H, D, Nk), a view
    for b in range(B):
        for h0 in range(0, H, step):
            heads = slice(h0, min(H, h0 + step))
            scores = torch.matmul(query[b, heads], key_t[b, heads])  # (h, Nq, Nk)
            probs = torch.softmax(scores.mul_(scaling), dim=-1)  # (h, Nq, Nk), fp32 accumulation inside
            torch.matmul(probs, value[b, heads], out=out[b, heads])  # (h, Nq, Dv)
    return out


def blocked_dtype(
    query: torch.Tensor, key: torch.Tensor, attention_mask: torch.Tensor | None, dropout: float, causal: bool
) -> torch.dtype | None:
    """The precision the blocked kernel would run this call at, or None where it does not cover the call (a GPU,
    fp32, a mask, dropout, causal attention over several queries, gradients, grouped keys)."""
    device = query.device.type
    # Under autocast the projections come out in its dtype but RoPE (fp32 tables) can promote q and k back to fp32;
    # torch's SDPA is autocast to the low precision, so that is the precision this runs at too.
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else query.dtype
    covered = (
        device == "cpu"
        and dtype in (torch.bfloat16, torch.float16)
        and attention_mask is None
        and not dropout
        and not (causal and query.shape[2] > 1)
        and not torch.is_grad_enabled()
        and key.shape[1] == query.shape[1]
    )
    return dtype if covered else None


def run_blocked(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scaling: float | None, dtype: torch.dtype
) -> torch.Tensor:
    """:func:`blocked_attention` at ``dtype`` (from :func:`blocked_dtype`): (B, H, N, D) in, (B, N, H, D) out."""
    scale = query.shape[-1] ** -0.5 if scaling is None else scaling
    with torch.autocast(query.device.type, enabled=False):  # the dtypes below are the ones meant
        out = blocked_attention(query.to(dtype), key.to(dtype), value.to(dtype), scale)  # (B, H, N, D)
    return out.transpose(1, 2).contiguous()  # (B, N, H, D)


def attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers' attention-function signature: (B, H, N, D) inputs, (B, N, H, D) output and no weights."""
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)  # transformers' default
    dtype = None if kwargs.get("output_attentions") else blocked_dtype(query, key, attention_mask, dropout, causal)
    if dtype is None:
        # transformers: loaded on first use, not on import
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    return run_blocked(query, key, value, scaling, dtype), None  # as transformers' SDPA function returns


def fast_path_attention(device_type: str, dtype: str) -> str:
    """The backbone attention of the fast path: :data:`NAME` on a CPU in bf16 / fp16 (module docstring), else
    transformers' "sdpa" (a GPU's flash kernels; fp32 on a CPU, where torch's kernel is the faster)."""
    return NAME if device_type == "cpu" and dtype in ("bf16", "fp16") else "sdpa"


def register() -> str:
    """Register :func:`attention_forward` with transformers as :data:`NAME` (idempotent); returns the name."""
    from transformers import AttentionInterface  # transformers: loaded on first use, not on import

    AttentionInterface.register(NAME, attention_forward)
    return NAME
