"""para_core.model.dinov3_vit against its reference, transformers' DINOv3ViTModel, on the same weights: outputs,
gradients, train-time randomness, the CPU bf16 kernel, loading a transformers directory, random initialisation; and
that the policy's inference path never imports transformers (the point of having the module)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import DINOv3ViTConfig, DINOv3ViTModel

from para_core.model import cpu_attention
from para_core.model.backbone_configs import DINOV3_TINY
from para_core.model.dinov3_vit import DINOv3Arch, DINOv3ViT, load_pretrained

REPO = Path(__file__).resolve().parents[1]

# The shipped toy layout (gated SiLU MLP, 4 registers) and a plain one (GELU MLP, no registers, key bias, a layer
# scale below 1) with every train-time randomness on.
CONFIGS = {
    "gated_registers": dict(DINOV3_TINY),
    "plain_augmented": {
        **DINOV3_TINY,
        "use_gated_mlp": False,
        "hidden_act": "gelu",
        "num_register_tokens": 0,
        "key_bias": True,
        "mlp_bias": False,
        "layerscale_value": 0.1,
        "pos_embed_shift": 0.1,
        "pos_embed_jitter": 1.3,
        "pos_embed_rescale": 2.0,
        "drop_path_rate": 0.25,
    },
    "tanh_gelu": {**DINOV3_TINY, "hidden_act": "gelu_pytorch_tanh", "num_attention_heads": 4},
}


def pair(config: dict, seed: int = 0) -> tuple[DINOv3ViTModel, DINOv3ViT]:
    """transformers' model with random weights, and ours holding the same tensors."""
    torch.manual_seed(seed)
    reference = DINOv3ViTModel(DINOv3ViTConfig(**config))
    with torch.no_grad():  # non-zero tokens and layer scales, so a wrong slice or a missed branch shows
        for name, p in reference.named_parameters():
            if "token" in name or "lambda" in name or "bias" in name:
                p.normal_(0.0, 0.5)
    ours = DINOv3ViT(DINOv3Arch.from_dict(config))
    ours.load_state_dict(reference.state_dict(), strict=True)
    return reference, ours


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_parameter_names_order_and_shapes_are_transformers(name):
    reference = DINOv3ViTModel(DINOv3ViTConfig(**CONFIGS[name]))
    ours = DINOv3ViT(DINOv3Arch.from_dict(CONFIGS[name]))
    assert [(k, v.shape) for k, v in reference.state_dict().items()] == [
        (k, v.shape) for k, v in ours.state_dict().items()
    ]
    assert [k for k, _ in reference.named_parameters()] == [k for k, _ in ours.named_parameters()]


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_eval_outputs_equal_transformers(name, attention):
    reference, ours = pair(CONFIGS[name])
    reference.set_attn_implementation(attention)
    ours.set_attention(attention)
    x = torch.randn(2, 3, 64, 48)  # an 8 x 6 grid: rows and columns differ
    with torch.no_grad():
        want = reference.eval()(pixel_values=x).last_hidden_state
        got = ours.eval()(x)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_training_forward_randomness_and_gradients_equal_transformers(name):
    """Train mode draws the RoPE augmentations and the dropped paths from torch's global generator in transformers'
    order: the same seed gives the same outputs and the same gradients for every parameter."""
    reference, ours = pair(CONFIGS[name], seed=1)
    x = torch.randn(3, 3, 32, 48)  # a 2 x 3 grid
    torch.manual_seed(7)
    want = reference.train()(pixel_values=x).last_hidden_state
    torch.manual_seed(7)
    got = ours.train()(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    target = torch.randn(want.shape)  # (3, 1 + R + 6, C)
    ((want - target) ** 2).mean().backward()
    ((got - target) ** 2).mean().backward()
    for (n, a), (_, b) in zip(reference.named_parameters(), ours.named_parameters()):
        if a.grad is None:
            assert b.grad is None or not b.grad.any(), n
            continue
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-6, msg=n)
    if CONFIGS[name].get("pos_embed_rescale"):  # the augmentation really is on: eval differs from train
        with torch.no_grad():
            torch.manual_seed(7)
            assert not torch.allclose(ours.eval()(x), got.detach(), atol=1e-4)


def test_cpu_bf16_kernel_matches_transformers_with_it_registered(monkeypatch):
    """The fast path's attention: ours calls the blocked kernel in every layer, as transformers does once the kernel
    is registered with it, and the two agree to the bit."""
    reference, ours = pair(CONFIGS["gated_registers"])
    reference.set_attn_implementation(cpu_attention.register())
    ours.set_attention(cpu_attention.NAME)
    calls = []
    original = cpu_attention.blocked_attention
    monkeypatch.setattr(cpu_attention, "blocked_attention", lambda *a: calls.append(a[0].dtype) or original(*a))
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        want = reference.eval()(pixel_values=x).last_hidden_state
        got = ours.eval()(x)
    assert calls == [torch.bfloat16] * (2 * reference.config.num_hidden_layers)
    assert torch.equal(got, want)


def test_loads_a_transformers_directory_in_either_layer_layout(tmp_path):
    """save_pretrained's directory loads; so does the same weights under transformers 4's "layer.N" names (the
    hub's DINOv3 releases); a missing tensor or another model type is refused by name."""
    reference, _ = pair(CONFIGS["gated_registers"], seed=2)
    reference.save_pretrained(tmp_path / "new")
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        want = reference.eval()(pixel_values=x).last_hidden_state
        loaded = load_pretrained(tmp_path / "new", pos_embed_rescale=None).eval()
        torch.testing.assert_close(loaded(x), want, rtol=1e-5, atol=1e-5)
    assert loaded.config.pos_embed_rescale is None and loaded.config.num_register_tokens == 4

    old = tmp_path / "old"
    old.mkdir()
    (old / "config.json").write_text((tmp_path / "new" / "config.json").read_text())
    tensors = {}
    for shard in (tmp_path / "new").glob("*.safetensors"):
        tensors.update(load_file(shard))
    renamed = {k.replace("model.layer.", "layer."): v for k, v in tensors.items()}
    assert any(k.startswith("layer.0.") for k in renamed)
    save_file(renamed, old / "model.safetensors")
    with torch.no_grad():
        torch.testing.assert_close(load_pretrained(old).eval()(x), want, rtol=1e-5, atol=1e-5)

    del renamed["layer.1.mlp.up_proj.weight"]
    save_file(renamed, old / "model.safetensors")
    with pytest.raises(ValueError, match=r"missing \['model\.layer\.1\.mlp\.up_proj\.weight'\]"):
        load_pretrained(old)
    config = json.loads((old / "config.json").read_text())
    (old / "config.json").write_text(json.dumps({**config, "model_type": "dinov2"}))
    with pytest.raises(ValueError, match="model_type 'dinov2'.*'dinov3_vit'"):
        load_pretrained(old)


def test_random_initialisation_follows_transformers():
    """Truncated normal at initializer_range for the projections and tokens, zero biases and mask token, the layer
    scale at its value, unit LayerNorms: the same distribution as transformers' init (compared by its statistics)."""
    config = {**DINOV3_TINY, "hidden_size": 128, "intermediate_size": 256, "layerscale_value": 0.5}
    torch.manual_seed(0)
    reference = DINOv3ViTModel(DINOv3ViTConfig(**config))
    ours = DINOv3ViT(DINOv3Arch.from_dict(config))
    for (name, a), (_, b) in zip(reference.state_dict().items(), ours.state_dict().items()):
        if a.numel() < 64 or a.std() == 0:  # constants: equal
            assert torch.equal(a, b), name
        else:
            assert abs(b.std().item() / a.std().item() - 1.0) < 0.15, name
            assert b.abs().max() <= 2.0, name  # truncated at +-2


@pytest.mark.parametrize(
    "change, message",
    [
        ({"hidden_size": 60}, "whole multiple of 4"),
        ({"hidden_act": "mish"}, r"hidden_act = 'mish': use one of"),
        ({"num_register_tokens": -1}, "0 or more"),
        ({"pos_embed_rescale": 0.5}, "pos_embed_rescale = 0.5: must be None or at least 1.0"),
        ({"drop_path_rate": 1.0}, r"must be in \[0, 1\)"),
        ({"hidden_szie": 64}, r"\['hidden_szie'\] are not DINOv3ViTConfig fields"),
        ({"patch_size": [8, 16]}, "not square"),
    ],
)
def test_bad_architectures_are_refused_by_name(change, message):
    with pytest.raises(ValueError, match=message):
        DINOv3Arch.from_dict({**DINOV3_TINY, **change})


def test_inference_never_imports_transformers():
    """Loading the shipped default checkpoint and predicting, on the reference path and on the bf16 fast path, in a
    fresh interpreter: transformers stays unimported (its import is seconds of a node's start-up)."""
    script = f"""
import sys
sys.path.insert(0, {str(REPO / "test")!r})
from para_core.model.config import V4Config
from para_core.model.policy import Policy
from test_core_fast_path import observation
policy = Policy.from_checkpoint({str(REPO / "checkpoints" / "pick_place_robust")!r}, device="cpu")
policy.predict(*observation(policy.config, 0))
cfg = V4Config.tiny()
fast = Policy.random_init(cfg, device="cpu", seed=0, dtype="bf16", fast=True)
fast.predict(*observation(cfg, 0))
print("attention", fast.attention, "transformers" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-3:] == ["attention", cpu_attention.NAME, "False"], out.stdout
