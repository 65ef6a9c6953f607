"""The whole InternVL backbone (``backbone_kind = "internvl"``, PARA v4's v4_vlm as designed) with random weights from
configs: the features against an independent pass through transformers' InternVL parts (tower, pixel shuffle,
projector, language model), the prompt reaching them, the language model frozen in a training step (no gradient, no
optimiser state, unchanged) while the vision tokens learn through it, the parameter count by hand, checkpoints, a
local pretrained directory, and the refusals. Also: the head's tensors across the three paper presets."""

import importlib.util
import json

import numpy as np
import pytest
import torch
from core_fixtures import make_inputs, make_trajectory

from para_core.model.backbone_vlm import InternVLLanguageBackbone
from para_core.model.backbones import BACKBONE_REGISTRY, count_parameters
from para_core.model.checkpoint import load_checkpoint, save_checkpoint
from para_core.model.config import INTERNVL_TINY, V4Config
from para_core.model.registry import build_model

torch.set_num_threads(1)


def _tiny(prompt="pick up the cube", **overrides) -> V4Config:
    return V4Config.tiny(backbone_kind="internvl", backbone_config={**INTERNVL_TINY, "prompt": prompt}, **overrides)


def _sample(cfg, seed=0, batch=1):
    from para_core.model.actions import encode_targets
    from para_core.model.voxels import build_voxel_grid

    inp = make_inputs(cfg, batch=batch, seed=seed)
    grid = build_voxel_grid(cfg, inp.K_img, inp.T_world_cam)
    pos, rot, grip = make_trajectory(cfg, batch=batch, seed=seed)
    return inp, encode_targets(cfg, grid, pos, rot, grip)


# ------------------------------------------------------------------------------------------- presets and the head
def test_registered_and_presets():
    assert BACKBONE_REGISTRY["internvl"] is InternVLLanguageBackbone
    cfg = _tiny()
    assert (cfg.backbone_kind, cfg.patch_size, cfg.img_size) == ("internvl", 14, 112)
    paper, vlm = V4Config.paper(), V4Config.paper_vlm()
    assert (vlm.backbone_kind, vlm.patch_size, vlm.img_size) == ("internvl", 14, 448)
    a, b = paper.to_flat_dict(), vlm.to_flat_dict()
    differ = {k for k in a if a[k] != b[k]}
    assert differ == {"name", "backbone_kind", "backbone_config", "patch_size", "img_size"}  # the head is v4's
    assert V4Config.from_json(vlm.to_json()) == vlm and V4Config.preset("paper_vlm") == vlm
    assert V4Config.paper_internvl().backbone_kind == "internvl_vision"  # the tower-only variant stays


def _head_shapes(cfg: V4Config) -> tuple[dict[str, tuple[int, ...]], int]:
    # shapes only: the transformers backbones are built on the meta device; DA3's code reads values when it builds
    with torch.device("cpu" if cfg.backbone_kind == "da3" else "meta"):
        model = build_model(cfg)
    head = {n: tuple(p.shape) for n, p in model.named_parameters() if not n.startswith("backbone.")}
    return head, model.backbone.hidden_size


_DA3 = importlib.util.find_spec("depth_anything_3") is not None


@pytest.mark.parametrize(
    "preset",
    [
        "paper_vlm",
        "paper_internvl",
        pytest.param("paper_da3", marks=pytest.mark.skipif(not _DA3, reason="depth-anything-3 not installed")),
    ],
)
def test_head_parameters_are_the_paper_presets(preset):
    """Every head tensor has the paper preset's name and shape; the two layers that read backbone tokens (the 1x1
    projection and the global MLP's first layer) differ only by the backbone's channel count C."""
    ref, c_ref = _head_shapes(V4Config.paper())
    got, c = _head_shapes(V4Config.preset(preset))
    assert got.keys() == ref.keys()
    cfg = V4Config.paper()
    n_in = 10 + 3 * cfg.mv_past_n
    assert ref["proj.weight"] == (cfg.feat_dim, c_ref, 1, 1)
    assert ref["global_mlp.0.weight"] == (cfg.global_mlp_hidden, n_in + cfg.n_views * c_ref)
    expect = {
        **ref,
        "proj.weight": (cfg.feat_dim, c, 1, 1),
        "global_mlp.0.weight": (cfg.global_mlp_hidden, n_in + cfg.n_views * c),
    }
    assert got == expect
    assert c == {"paper_vlm": 896, "paper_internvl": 1024, "paper_da3": 768}[preset]


def test_internvl25_1b_parameter_count_by_hand():
    with torch.device("meta"):
        model = build_model(V4Config.paper_vlm())
    vlm = model.backbone.vlm
    C, I, L, V, kv = 896, 4864, 24, 151674, 128  # Qwen2.5-0.5B: 2 key/value heads of 64
    layer = (C * C + C) + 2 * (C * kv + kv) + C * C + 3 * C * I + 2 * C  # q, k, v (biases), o, gated MLP, 2 RMSNorms
    lm = V * C + L * layer + C  # embeddings (tied with the output), layers, final norm
    Cv = 1024 * 4  # the 2 x 2 pixel shuffle's channels
    projector = 2 * Cv + (Cv * C + C) + (C * C + C)  # LayerNorm, two linear layers
    assert count_parameters(vlm.language_model) == lm == 493_798_016
    assert count_parameters(vlm.multi_modal_projector) == projector
    assert count_parameters(vlm.vision_tower) == 304_012_288  # test_core_backbones.py counts it by hand
    assert count_parameters(model.backbone) == 802_293_120
    assert not any(p.requires_grad for p in vlm.language_model.parameters())


# ------------------------------------------------------------------------------------------------------- features
def _reference_features(backbone: InternVLLanguageBackbone, pixels: torch.Tensor, prompt_ids: list[int]):
    """By hand through transformers' parts: InternViT's last layer without CLS, the 2 x 2 pixel shuffle, the
    projector, then the language model on [prompt embeddings, image embeddings]; its last hidden state at the
    image positions, laid out on the (S/28, S/28) grid."""
    vlm = backbone.vlm
    B, _, S, _ = pixels.shape
    g = S // 14
    tokens = vlm.vision_tower(pixel_values=pixels).last_hidden_state[:, 1:]  # (B, g*g, Cv)
    x = tokens.reshape(B, g // 2, 2, g // 2, 2, -1)  # (B, i, di, j, dj, Cv)
    # image token (i, j) holds patches (2i + di, 2j + dj), channels ordered (di, dj, Cv); tokens row-major
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(B, (g // 2) ** 2, -1)  # (B, h*w, 4 Cv)
    image = vlm.multi_modal_projector(x)  # (B, h*w, C)
    text = vlm.language_model.get_input_embeddings()(torch.tensor(prompt_ids)).expand(B, -1, -1)  # (B, L, C)
    hidden = vlm.language_model(inputs_embeds=torch.cat([text, image], dim=1)).last_hidden_state  # (B, L + h*w, C)
    out = hidden[:, len(prompt_ids) :]  # (B, h*w, C)
    return out.transpose(1, 2).reshape(B, -1, g // 2, g // 2), out.mean(1)


def test_features_are_the_language_models_states_at_the_image_tokens():
    torch.manual_seed(0)
    cfg = _tiny()
    model = build_model(cfg).eval()
    bb = model.backbone
    assert bb.prompt_ids == list(b"pick up the cube")  # no tokenizer: the UTF-8 bytes
    pixels = make_inputs(cfg, batch=2).images.flatten(0, 1)  # (4, 3, 112, 112)
    with torch.no_grad():
        out = bb(pixels)
        grid, glob = _reference_features(bb, pixels, bb.prompt_ids)
    assert out.patch_grid.shape == (4, 64, 4, 4)
    torch.testing.assert_close(out.patch_grid, grid, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.cls, glob, rtol=1e-5, atol=1e-5)


def test_the_prompt_reaches_the_features():
    torch.manual_seed(0)
    a = build_model(_tiny("pick up the cube")).eval()
    b = build_model(_tiny("stack the blocks")).eval()
    b.load_state_dict(a.state_dict())  # the same weights, another prompt
    pixels = make_inputs(a.config, batch=1).images.flatten(0, 1)
    with torch.no_grad():
        fa, fb = a.backbone(pixels).patch_grid, b.backbone(pixels).patch_grid
        tower = a.backbone.vlm.get_image_features(pixel_values=pixels).pooler_output  # the projector's output
    assert (fa - fb).abs().amax() > 1e-2
    assert (fa.flatten(2).transpose(1, 2) - tower).abs().amax() > 1e-2  # not the vision tokens passed through


# ---------------------------------------------------------------------------------- training step and checkpoints
def test_training_step_language_model_frozen_vision_tokens_learn():
    torch.manual_seed(0)
    cfg = _tiny()
    model = build_model(cfg).train()
    lm = model.backbone.vlm.language_model
    assert not lm.training  # frozen: eval mode inside a model in train mode
    lm_names = {f"backbone.vlm.language_model.{n}" for n, _ in lm.named_parameters()}
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.AdamW(model.param_groups(), lr=1e-3)
    inp, tgt = _sample(cfg, batch=2)
    out = model(inp, tgt)
    assert out.volume_logits.shape == (2, cfg.n_window, cfg.n_voxels)
    out.losses["loss"].backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    assert all(grads[n] is None for n in lm_names)
    tower = [n for n in grads if n.startswith("backbone.vlm.vision_tower.") and "mask_token" not in n]
    assert all(grads[n] is not None and grads[n].abs().sum() > 0 for n in tower)  # through the frozen LM
    opt.step()
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters() if n in lm_names)
    assert not all(torch.equal(p, before[n]) for n, p in model.named_parameters() if n in tower)
    in_opt = {id(p) for g in opt.param_groups for p in g["params"]}
    lm_ids = {id(p) for p in lm.parameters()}
    assert not in_opt & lm_ids and not set(map(id, opt.state)) & lm_ids  # no optimiser state for the LM


def test_checkpoint_roundtrip_identical_outputs(tmp_path):
    torch.manual_seed(1)
    cfg = _tiny()
    model = build_model(cfg).eval()
    path = save_checkpoint(tmp_path / "ckpt", model)
    saved = json.loads((path / "config.json").read_text())["config"]["backbone"]
    assert (saved["backbone_kind"], saved["backbone_config"]["prompt"]) == ("internvl", "pick up the cube")
    loaded, cfg2, _ = load_checkpoint(path, expected_kind="para_v4")
    assert cfg2 == cfg and isinstance(loaded.backbone, InternVLLanguageBackbone)
    assert not any(p.requires_grad for p in loaded.backbone.vlm.language_model.parameters())
    inp = make_inputs(cfg, batch=2)
    with torch.no_grad():
        a, b = model(inp), loaded(inp)
    assert torch.equal(a.volume_logits, b.volume_logits) and torch.equal(a.cls, b.cls)


def test_pretrained_dir_and_refusals(tmp_path):
    from safetensors.torch import load_file, save_file
    from transformers import InternVLVisionConfig, InternVLVisionModel

    torch.manual_seed(2)
    ref = build_model(_tiny()).backbone.vlm
    good = tmp_path / "internvl-hf"
    ref.save_pretrained(str(good), safe_serialization=True)

    def build(path, prompt="pick up the cube"):
        return build_model(_tiny(prompt, backbone_pretrained_dir=str(path)))

    model = build(good)
    a, b = ref.state_dict(), model.backbone.vlm.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    ckpt = save_checkpoint(tmp_path / "ckpt", model)  # self-contained: the architecture and the prompt's ids
    meta = json.loads((ckpt / "config.json").read_text())["config"]["backbone"]
    assert meta["backbone_pretrained_dir"] == "" and meta["backbone_config"]["prompt_token_ids"] == list(
        b"pick up the cube"
    )
    loaded, _, _ = load_checkpoint(ckpt, expected_kind="para_v4")  # rebuilt from the recorded architecture
    c = loaded.backbone.vlm.state_dict()
    assert c.keys() == a.keys() and all(torch.equal(a[k], c[k]) for k in a)
    assert loaded.backbone.prompt_ids == model.backbone.prompt_ids
    with pytest.raises(ValueError, match="not a local directory.*huggingface-cli download"):
        build("OpenGVLab/InternVL2_5-1B")
    tower = tmp_path / "tower"
    InternVLVisionModel(InternVLVisionConfig(**INTERNVL_TINY["vision_config"])).save_pretrained(str(tower))
    with pytest.raises(ValueError, match="'internvl_vision'.*use backbone_kind 'internvl_vision'"):
        build(tower)
    broken = tmp_path / "broken"
    ref.save_pretrained(str(broken), safe_serialization=True)
    (shard,) = broken.glob("*.safetensors")
    state = load_file(str(shard))
    victim = next(k for k in state if "layers.1.mlp.up_proj" in k)
    del state[victim]
    save_file(state, str(shard), metadata={"format": "pt"})
    with pytest.raises(ValueError, match="lacks InternVL weights.*up_proj.*re-export it"):
        build(broken)


# ----------------------------------------------------------------------------------------------------- refusals
def test_prompt_longer_than_the_language_model_takes_is_refused():
    # tiny: 64 positions, 16 image tokens -> at most 48 prompt tokens (bytes here)
    assert build_model(_tiny("x" * 48)).backbone.prompt_ids == [ord("x")] * 48
    with pytest.raises(ValueError, match="prompt'\\] is 49 tokens.*limit of 64 positions.*at most 48 tokens"):
        build_model(_tiny("x" * 49))
    with pytest.raises(ValueError, match=r"keys \['hidden_size'\] are unknown"):
        V4Config.tiny(backbone_kind="internvl", backbone_config={**INTERNVL_TINY, "hidden_size": 64})
    with pytest.raises(ValueError, match="prompt.*use a string"):
        _tiny(prompt=3)
    with pytest.raises(ValueError, match="img_size = 126.*multiple of 28"):
        build_model(_tiny(img_size=126))


def test_para_train_prompt_is_the_datasets_name_or_the_flag(tmp_path):
    from para_core.data.dataset import ARRAYS_FILE, META_FILE
    from para_core.train.cli import build_parser, resolve_configs

    episode = tmp_path / "pick_cube" / "ep_000"
    episode.mkdir(parents=True)
    (episode / META_FILE).write_text("{}")
    (episode / ARRAYS_FILE).write_bytes(b"")
    common = ["--data", str(tmp_path / "pick_cube"), "--out", str(tmp_path / "run")]
    model, _, _ = resolve_configs(build_parser().parse_args([*common, "--preset", "paper_vlm"]))
    assert model.backbone_config["prompt"] == "pick_cube"
    model, _, _ = resolve_configs(build_parser().parse_args([*common, "--preset", "paper_vlm", "--prompt", "stack"]))
    assert model.backbone_config["prompt"] == "stack"
    with pytest.raises(ValueError, match="--prompt is for backbone_kind 'internvl'"):
        resolve_configs(build_parser().parse_args([*common, "--preset", "paper", "--prompt", "stack"]))


def test_policy_reference_and_fast_paths_agree():
    """Through ``Policy``: preprocessing, the backbone with the observation's poses, decoding; the fast path
    (``para_core.model.v4_fast``) decodes the same chunk."""
    from test_core_fast_path import observation

    from para_core.model.policy import Policy

    cfg = _tiny()
    ref = Policy.random_init(cfg, device="cpu", seed=0)
    fast = Policy.random_init(cfg, device="cpu", seed=0, fast=True)
    obs = observation(cfg, 0)
    a, b = ref.predict(*obs), fast.predict(*obs)
    assert a.positions_world.shape == (cfg.n_window, 3)
    np.testing.assert_allclose(b.positions_world, a.positions_world, atol=1e-6)
    np.testing.assert_allclose(b.confidence, a.confidence, atol=1e-5)
