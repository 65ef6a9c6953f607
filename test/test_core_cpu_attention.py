"""para_core.model.cpu_attention against softmax(q k^T / sqrt(d)) v written out in float64, and its hand-over rules."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from para_core.model import cpu_attention
from para_core.model.config import V4Config
from para_core.model.policy import Policy


def reference_attention(q, k, v, scale):
    """float64, one (batch, head, query) row at a time: exp of the shifted scores, normalised by their sum."""
    q, k, v = (t.double().numpy() for t in (q, k, v))
    B, H, Nq, _ = q.shape
    out = np.zeros((B, H, Nq, v.shape[-1]))
    for b in range(B):
        for h in range(H):
            for i in range(Nq):
                s = k[b, h] @ q[b, h, i] * scale  # (Nk,)
                w = np.exp(s - s.max())
                out[b, h, i] = (w / w.sum()) @ v[b, h]
    return torch.from_numpy(out)


def qkv(B, H, Nq, Nk, D, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(B, H, Nq, D, generator=g).to(dtype),
        torch.randn(B, H, Nk, D, generator=g).to(dtype),
        torch.randn(B, H, Nk, D, generator=g).to(dtype),
    )


@pytest.mark.parametrize("block_bytes", [1, 3 * 33 * 45 * 4, 2**40])  # one head a block, 3 heads a block, all heads
def test_blocked_attention_is_softmax_attention_in_every_blocking(monkeypatch, block_bytes):
    """In fp32 the blocking must not change the result beyond float rounding: a block that skipped, repeated or
    mixed up heads or batches would be off by O(1)."""
    monkeypatch.setattr(cpu_attention, "SCORE_BLOCK_BYTES", block_bytes)
    q, k, v = qkv(2, 5, 33, 45, 16, torch.float32)
    scale = 0.25
    out = cpu_attention.blocked_attention(q, k, v, scale)
    assert out.shape == (2, 5, 33, 16) and out.dtype == torch.float32
    torch.testing.assert_close(out.double(), reference_attention(q, k, v, scale), atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("dtype, resolution", [(torch.bfloat16, 2.0**-8), (torch.float16, 2.0**-11)])
def test_blocked_attention_in_low_precision_is_within_its_resolution(dtype, resolution):
    """On inputs already in the dtype: the outputs within a few units of the dtype's resolution of the float64
    reference (the probabilities are rounded to the dtype once). Dropping the scale or the max shift of the softmax
    would be off by far more."""
    q, k, v = qkv(2, 6, 70, 70, 64, dtype, seed=1)
    out = cpu_attention.blocked_attention(q, k, v, 64**-0.5)
    assert out.dtype == dtype
    err = (out.double() - reference_attention(q, k, v, 64**-0.5)).abs().max().item()
    assert err <= 8 * resolution, err


def test_heads_per_block_by_hand():
    mib4 = cpu_attention.SCORE_BLOCK_BYTES
    assert mib4 == 4 * 2**20
    assert cpu_attention.heads_per_block(1029, 1029, 2, 6) == 1  # 2.1 MB a head: one at a time (paper config)
    assert cpu_attention.heads_per_block(512, 512, 2, 6) == 6  # 0.5 MB a head: 8 would fit, there are 6
    assert cpu_attention.heads_per_block(512, 512, 2, 16) == 8
    assert cpu_attention.heads_per_block(21, 21, 2, 6) == 6  # tiny config: all heads at once
    assert cpu_attention.heads_per_block(4096, 4096, 4, 6) == 1  # never 0


class _Attention(torch.nn.Module):
    is_causal = False


def _sdpa(*args, **kwargs):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    return sdpa_attention_forward(*args, **kwargs)


@torch.no_grad()
def test_attention_forward_has_transformers_layout_and_sdpas_numbers_in_bf16():
    q, k, v = qkv(2, 6, 50, 50, 32, torch.bfloat16, seed=2)
    out, weights = cpu_attention.attention_forward(_Attention(), q, k, v, None, scaling=0.2)
    ref, _ = _sdpa(_Attention(), q, k, v, None, scaling=0.2)
    assert weights is None and out.shape == ref.shape == (2, 50, 6, 32) and out.dtype == ref.dtype
    exact = reference_attention(q, k, v, 0.2).transpose(1, 2)  # (B, N, H, D)
    assert (out.double() - exact).abs().max().item() <= 8 * 2.0**-8
    assert (out.double() - ref.double()).abs().max().item() <= 8 * 2.0**-8


@torch.no_grad()
def test_under_bf16_autocast_fp32_inputs_run_in_bf16_as_sdpa_does(monkeypatch):
    """transformers' RoPE can hand fp32 q/k to the attention inside a bf16 autocast region; SDPA is autocast to bf16
    there, so this runs in bf16 too (a bf16 output), and not the fp32 fallback."""
    q, k, v = qkv(1, 4, 40, 40, 16, torch.float32, seed=3)
    calls = []
    original = cpu_attention.blocked_attention
    monkeypatch.setattr(cpu_attention, "blocked_attention", lambda *a: calls.append(a[0].dtype) or original(*a))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = cpu_attention.attention_forward(_Attention(), q, k, v, None, scaling=0.25)
        ref, _ = _sdpa(_Attention(), q, k, v, None, scaling=0.25)
    assert calls == [torch.bfloat16] and out.dtype == ref.dtype == torch.bfloat16
    assert (out.double() - ref.double()).abs().max().item() <= 8 * 2.0**-8


@pytest.mark.parametrize("case", ["fp32", "mask", "grad", "dropout", "causal"])
def test_what_it_does_not_cover_goes_to_sdpa_unchanged(monkeypatch, case):
    """Each case outside the fast one is transformers' SDPA bit for bit (the blocked kernel never runs)."""
    dtype = torch.float32 if case == "fp32" else torch.bfloat16
    q, k, v = qkv(1, 2, 12, 12, 8, dtype, seed=4)
    mask = None
    if case == "mask":  # additive, some keys hidden from each query (never its own)
        hidden = (torch.rand(12, 12, generator=torch.Generator().manual_seed(6)) > 0.7).fill_diagonal_(False)
        mask = torch.zeros(12, 12, dtype=dtype).masked_fill(hidden, -math.inf).view(1, 1, 12, 12)
    module = _Attention()
    kwargs = {"scaling": 0.3, "dropout": 0.0}
    if case == "causal":
        module.is_causal = True
    monkeypatch.setattr(cpu_attention, "blocked_attention", None)  # calling it would raise
    with torch.set_grad_enabled(case == "grad"):
        if case == "dropout":
            torch.manual_seed(5)
            out, _ = cpu_attention.attention_forward(module, q, k, v, mask, **{**kwargs, "dropout": 0.5})
            torch.manual_seed(5)
            ref, _ = _sdpa(module, q, k, v, mask, **{**kwargs, "dropout": 0.5})
        else:
            out, _ = cpu_attention.attention_forward(module, q, k, v, mask, **kwargs)
            ref, _ = _sdpa(module, q, k, v, mask, **kwargs)
    assert torch.equal(out, ref)


@pytest.mark.parametrize(
    "fast, dtype, expected", [(True, "bf16", cpu_attention.NAME), (True, "fp32", "sdpa"), (False, "bf16", "sdpa")]
)
def test_policy_uses_it_only_on_the_fast_path_in_low_precision(monkeypatch, fast, dtype, expected):
    """And the backbone's layers really call it: one blocked call per layer and view batch in a prediction."""
    cfg = V4Config.tiny()
    policy = Policy.random_init(cfg, device="cpu", seed=0, dtype=dtype, fast=fast)
    assert policy.attention == expected
    calls = []
    original = cpu_attention.blocked_attention
    monkeypatch.setattr(cpu_attention, "blocked_attention", lambda *a: calls.append(a[0].shape) or original(*a))
    from test_core_fast_path import observation

    policy.predict(*observation(cfg, 0))
    layers = policy.model.backbone.vit.config.num_hidden_layers
    assert len(calls) == (layers if expected == cpu_attention.NAME else 0)
