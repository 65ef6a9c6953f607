"""The second backbone (``internvl_vision``: InternVL 2.5's InternViT vision tower) behind the same interface as DINOv3:
token layout and pixel alignment against hand computations, the 300 M parameter count against a hand count, a full v4
forward + backward, checkpoints, local pretrained directories (a saved tower and a whole InternVL model), and the
config validation. DINOv3: token layout (CLS, registers, row-major patches) and pixel alignment against hand
computations, and the same positional encodings in train and eval mode (its RoPE rescaling is off)."""

import json

import numpy as np
import pytest
import torch
from core_fixtures import make_inputs, make_trajectory

from para_core.model.backbones import (
    BACKBONE_REGISTRY,
    DINOv3Backbone,
    InternVLVisionBackbone,
    build_backbone,
    count_parameters,
)
from para_core.model.checkpoint import load_checkpoint, save_checkpoint
from para_core.model.config import DINOV3_TINY, INTERNVL25_1B_VISION, INTERNVL_VISION_TINY, V4Config
from para_core.model.registry import build_model

torch.set_num_threads(1)


def _tiny(**overrides) -> V4Config:
    return V4Config.tiny(backbone_kind="internvl_vision", **overrides)


def _layer_norm_np(x: np.ndarray, eps: float) -> np.ndarray:
    x = x.astype(np.float64)
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps)


def _internvit_params_by_hand(C: int, I: int, L: int, p: int, S: int, qkv_bias: bool) -> int:
    """InternViT: per layer q/k/v (+bias), output projection, 2-layer MLP, 2 LayerNorms, 2 layer-scale vectors;
    plus the patch conv, the CLS token and one position embedding per patch + CLS."""
    per_layer = 3 * C * C + (3 * C if qkv_bias else 0) + (C * C + C) + (C * I + I) + (I * C + C) + 2 * 2 * C + 2 * C
    embed = 3 * p * p * C + C + C + ((S // p) ** 2 + 1) * C
    return L * per_layer + embed


def test_registered_and_presets():
    assert BACKBONE_REGISTRY["internvl_vision"] is InternVLVisionBackbone
    cfg = _tiny()
    assert (cfg.backbone_kind, cfg.patch_size, cfg.img_size) == ("internvl_vision", 14, 56)
    assert cfg.backbone_config == INTERNVL_VISION_TINY
    paper, vlm = V4Config.paper(), V4Config.paper_internvl()
    assert (vlm.backbone_kind, vlm.patch_size, vlm.img_size, vlm.patch_grid) == ("internvl_vision", 14, 448, 32)
    a, b = paper.to_flat_dict(), vlm.to_flat_dict()
    differ = {k for k in a if a[k] != b[k]}
    assert differ == {"name", "backbone_kind", "backbone_config", "patch_size", "img_size"}  # the head is v4's
    assert V4Config.from_json(vlm.to_json()) == vlm


def test_internvl25_1b_vision_tower_parameter_count():
    """InternVL 2.5-1B's vision tower is InternViT-300M: 304,012,288 parameters (built on the meta device)."""
    from transformers import InternVLVisionConfig, InternVLVisionModel

    cfg = V4Config.paper_internvl()
    with torch.device("meta"):
        backbone = build_backbone(cfg)
        vit_direct = InternVLVisionModel(InternVLVisionConfig(**INTERNVL25_1B_VISION))
    hand = _internvit_params_by_hand(C=1024, I=4096, L=24, p=14, S=448, qkv_bias=True)
    assert hand == 304_012_288
    assert count_parameters(backbone) == hand == count_parameters(vit_direct)
    assert backbone.hidden_size == 1024 and backbone.patch_size == 14
    # the toy preset has the same structure
    t = INTERNVL_VISION_TINY
    assert count_parameters(build_backbone(_tiny())) == _internvit_params_by_hand(
        C=t["hidden_size"], I=t["intermediate_size"], L=t["num_hidden_layers"], p=14, S=56, qkv_bias=True
    )


@pytest.mark.parametrize("img_size", [56, 84])  # 84: position embeddings interpolated from the 4 x 4 table to 6 x 6
def test_patch_grid_and_global_token_match_hand_computation(img_size):
    torch.manual_seed(0)
    cfg = _tiny(img_size=img_size)
    bb = build_backbone(cfg).eval()
    with torch.no_grad():  # non-trivial CLS / position embeddings so that a wrong slice cannot pass
        bb.vit.embeddings.cls_token.normal_()
        bb.vit.embeddings.position_embeddings.normal_()
    x = torch.randn(2, 3, img_size, img_size)
    with torch.no_grad():
        out = bb(x)
        tokens = bb.vit(pixel_values=x).last_hidden_state.double().numpy()  # (B, 1 + h*w, C)
    h = img_size // 14
    C = cfg.backbone_config["hidden_size"]
    assert out.patch_grid.shape == (2, C, h, h) and out.cls.shape == (2, C)
    eps = cfg.backbone_config["layer_norm_eps"]
    for b in range(2):
        for i in range(h):
            for j in range(h):
                ref = _layer_norm_np(tokens[b, 1 + i * h + j], eps)  # row-major patches after the CLS token
                assert np.abs(out.patch_grid[b, :, i, j].double().numpy() - ref).max() < 1e-4
        ref_glob = _layer_norm_np(tokens[b, 1:].mean(0), eps)  # mean of the patch tokens, CLS excluded
        assert np.abs(out.cls[b].double().numpy() - ref_glob).max() < 1e-4


def test_grid_cell_i_j_sees_pixel_block_i_j():
    """With no transformer layers a token depends on its own 14 x 14 pixel block only: changing block (row 2, col 1)
    changes grid cell [2, 1] and nothing else (pixel alignment: row index = image row)."""
    torch.manual_seed(0)
    cfg = _tiny(backbone_config={**INTERNVL_VISION_TINY, "num_hidden_layers": 0})
    bb = build_backbone(cfg).eval()
    x = torch.randn(1, 3, 56, 56)
    y = x.clone()
    y[:, :, 28:42, 14:28] += 1.0  # rows 28..41 = patch row 2, columns 14..27 = patch column 1
    with torch.no_grad():
        diff = (bb(x).patch_grid - bb(y).patch_grid).abs().amax(dim=1)[0]  # (h, w)
    changed = (diff > 1e-6).nonzero().tolist()
    assert changed == [[2, 1]]


def _sample(cfg, seed=0):
    from para_core.model.actions import encode_targets
    from para_core.model.voxels import build_voxel_grid

    inp = make_inputs(cfg, batch=1, seed=seed)
    grid = build_voxel_grid(cfg, inp.K_img, inp.T_world_cam)
    pos, rot, grip = make_trajectory(cfg, batch=1, seed=seed)
    return inp, encode_targets(cfg, grid, pos, rot, grip)


def test_full_v4_forward_backward_with_internvl():
    torch.manual_seed(0)
    cfg = _tiny()
    model = build_model(cfg).train()
    inp, tgt = _sample(cfg)
    out = model(inp, tgt)
    assert out.cls.shape == (1, cfg.n_views, cfg.backbone_config["hidden_size"])
    assert out.volume_logits.shape == (1, cfg.n_window, cfg.n_voxels)
    assert all(torch.isfinite(v).all() for v in out.losses.values())
    out.losses["loss"].backward()
    no_grad = [
        n for n, p in model.named_parameters() if p.requires_grad and (p.grad is None or p.grad.abs().sum() == 0)
    ]
    assert no_grad == []  # every backbone tensor (CLS, position table, layer scales, ...) is reached
    groups = {g["name"]: g for g in model.param_groups()}
    assert sum(p.numel() for p in groups["backbone"]["params"]) == count_parameters(model.backbone)


def test_checkpoint_roundtrip_identical_outputs(tmp_path):
    torch.manual_seed(1)
    cfg = _tiny()
    model = build_model(cfg).eval()
    path = save_checkpoint(tmp_path / "ckpt", model)
    meta = json.loads((path / "config.json").read_text())
    assert meta["config"]["backbone"]["backbone_kind"] == "internvl_vision"  # written grouped
    loaded, cfg2, _ = load_checkpoint(path, expected_kind="para_v4")
    assert cfg2 == cfg and isinstance(loaded.backbone, InternVLVisionBackbone)
    inp = make_inputs(cfg, batch=2)
    with torch.no_grad():
        a, b = model(inp), loaded(inp)
    assert torch.equal(a.volume_logits, b.volume_logits) and torch.equal(a.cls, b.cls)
    assert torch.equal(a.gripper_logits, b.gripper_logits) and torch.equal(a.rotation_logits, b.rotation_logits)


def _assert_same_weights(ref: torch.nn.Module, got: torch.nn.Module):
    a, b = ref.state_dict(), got.state_dict()
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_pretrained_tower_dir_and_self_contained_checkpoint(tmp_path):
    from transformers import InternVLVisionConfig, InternVLVisionModel

    cfg = _tiny()
    torch.manual_seed(5)
    vit = InternVLVisionModel(InternVLVisionConfig(**{**cfg.backbone_config, "num_hidden_layers": 1}))
    with torch.no_grad():
        for p in vit.parameters():  # not the zero/constant init: every tensor distinct
            p.normal_()
    vit.save_pretrained(tmp_path / "tower")
    cfg_pre = cfg.replace(backbone_pretrained_dir=str(tmp_path / "tower"))
    model = build_model(cfg_pre).eval()
    _assert_same_weights(vit, model.backbone.vit)
    path = save_checkpoint(tmp_path / "ckpt", model)
    (tmp_path / "tower" / "config.json").unlink()  # the checkpoint must not need the directory
    loaded, cfg2, _ = load_checkpoint(path)
    assert cfg2.backbone_pretrained_dir == "" and cfg2.backbone_config["num_hidden_layers"] == 1
    assert cfg2.backbone_config["patch_size"] == 14 and cfg2.backbone_config["image_size"] == 56
    inp = make_inputs(cfg)
    with torch.no_grad():
        assert torch.equal(model(inp).volume_logits, loaded(inp).volume_logits)
    with pytest.raises(ValueError, match="has no config.json"):
        build_model(cfg_pre)


def test_pretrained_whole_internvl_model_dir_takes_the_vision_tower(tmp_path):
    """A whole transformers InternVL model (vision tower + projector + LLM): only the tower is read."""
    from transformers import InternVLConfig, InternVLForConditionalGeneration

    cfg = _tiny()
    torch.manual_seed(6)
    text = dict(
        model_type="qwen2",
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        vocab_size=300,
    )
    full = InternVLForConditionalGeneration(
        InternVLConfig(vision_config=dict(cfg.backbone_config), text_config=text, image_token_id=299)
    )
    with torch.no_grad():
        for p in full.model.vision_tower.parameters():
            p.normal_()
    full.save_pretrained(tmp_path / "internvl")
    model = build_model(cfg.replace(backbone_pretrained_dir=str(tmp_path / "internvl"))).eval()
    _assert_same_weights(full.model.vision_tower, model.backbone.vit)


def test_pretrained_dir_refusals(tmp_path):
    from transformers import InternVLVisionConfig, InternVLVisionModel

    cfg = _tiny()
    vit = InternVLVisionModel(InternVLVisionConfig(**cfg.backbone_config))
    vit.save_pretrained(tmp_path / "tower")
    for f in (tmp_path / "tower").glob("*.safetensors"):  # only a pickled pytorch_model.bin: refused, never unpickled
        f.unlink()
    torch.save(vit.state_dict(), tmp_path / "tower" / "pytorch_model.bin")
    with pytest.raises(ValueError, match="only safetensors are loaded"):
        build_model(cfg.replace(backbone_pretrained_dir=str(tmp_path / "tower")))
    # the original OpenGVLab format (trust_remote_code) is named, with the fix
    orig = tmp_path / "orig"
    orig.mkdir()
    (orig / "config.json").write_text(json.dumps({"model_type": "internvl_chat"}))
    from safetensors.torch import save_file

    save_file({"x": torch.zeros(1)}, str(orig / "model.safetensors"))
    with pytest.raises(ValueError, match="original OpenGVLab InternVL checkpoint.*convert"):
        build_model(cfg.replace(backbone_pretrained_dir=str(orig)))
    # a tower directory with a tensor missing is refused instead of leaving random weights behind
    from safetensors.torch import load_file

    vit.save_pretrained(tmp_path / "partial")
    w = tmp_path / "partial" / "model.safetensors"
    state = load_file(str(w))
    state.pop("embeddings.cls_token")
    save_file(state, str(w), metadata={"format": "pt"})
    with pytest.raises(ValueError, match="lacks InternViT weights.*cls_token"):
        build_model(cfg.replace(backbone_pretrained_dir=str(tmp_path / "partial")))


def test_validation_errors_name_field_value_and_fix():
    with pytest.raises(
        ValueError,
        match=r"V4Config\.img_size = 512 is invalid: must be a multiple of patch_size=14"
        r".*use 504 or 518.*448",
    ):
        V4Config.paper_internvl(img_size=512)
    with pytest.raises(ValueError, match=r"V4Config\.img_size = 64 is invalid.*use 56 or 70"):
        _tiny(img_size=64)
    with pytest.raises(ValueError, match=r"V4Config\.patch_size = 16 is invalid.*set patch_size=14.*448"):
        V4Config.paper_internvl(patch_size=16)
    with pytest.raises(
        ValueError,
        match=r"V4Config\.backbone_config = .*use_gated_mlp.*not transformers\."
        r"InternVLVisionConfig fields.*INTERNVL25_1B_VISION",
    ):
        V4Config.paper(backbone_kind="internvl_vision", patch_size=14, img_size=448)  # the default DINOv3 config
    with pytest.raises(ValueError, match=r"V4Config\.patch_size = 14 is invalid.*7-pixel patches.*set patch_size=7"):
        _tiny(backbone_config={**INTERNVL_VISION_TINY, "patch_size": 7})
    with pytest.raises(ValueError, match=r"V4Config\.backbone_kind = 'da2' is invalid.*'da3'"):
        V4Config.tiny(backbone_kind="da2")
    # transformers stores the patch as a (14, 14) pair; a square pair is accepted (e.g. a hand-edited config)
    assert _tiny(backbone_config={**INTERNVL_VISION_TINY, "patch_size": [14, 14]}).patch_size == 14


# ------------------------------------------------------------------------------------------------------- DINOv3
def _dinov3(**backbone_overrides) -> V4Config:
    return V4Config.tiny(backbone_config={**DINOV3_TINY, **backbone_overrides})


@pytest.mark.parametrize("hw", [(64, 64), (64, 96)])  # 64 x 96: a 4 x 6 grid, so a transposed reshape cannot pass
def test_dinov3_patch_grid_and_cls_are_the_right_tokens(hw):
    """DINOv3's last_hidden_state is [CLS, R register tokens, h*w patch tokens in row-major order]: the grid cell
    (i, j) must be token 1 + R + i * w + j and the global token the CLS (token 0)."""
    torch.manual_seed(0)
    cfg = V4Config.tiny()
    bb = build_backbone(cfg).eval()
    assert isinstance(bb, DINOv3Backbone)
    with torch.no_grad():  # distinct prefix tokens, so that a slice at the wrong offset cannot pass
        bb.vit.embeddings.cls_token.normal_()
        bb.vit.embeddings.register_tokens.normal_()
    H, W = hw
    x = torch.randn(2, 3, H, W)
    with torch.no_grad():
        out = bb(x)
        tokens = bb.vit(x)  # (B, 1 + R + h*w, C), the last hidden state
    R, C, p = cfg.backbone_config["num_register_tokens"], cfg.backbone_config["hidden_size"], cfg.patch_size
    h, w = H // p, W // p
    assert R == 4 and tokens.shape == (2, 1 + R + h * w, C)
    assert out.patch_grid.shape == (2, C, h, w) and out.cls.shape == (2, C)
    for b in range(2):
        for i in range(h):
            for j in range(w):
                assert torch.equal(out.patch_grid[b, :, i, j], tokens[b, 1 + R + i * w + j])
    assert torch.equal(out.cls, tokens[:, 0])


def test_dinov3_token_layout_and_pixel_alignment_by_hand():
    """With no transformer layers every output token is the final LayerNorm of its embedding: the CLS token, the
    register tokens and, for grid cell (i, j), the patch convolution of pixel rows [16 i, 16 i + 16) and columns
    [16 j, 16 j + 16) (hand computation on a 4 x 6 grid); changing one pixel block changes that cell only."""
    torch.manual_seed(0)
    cfg = _dinov3(num_hidden_layers=0)
    bb = build_backbone(cfg).eval()
    vit = bb.vit
    with torch.no_grad():
        for t in (vit.embeddings.cls_token, vit.embeddings.register_tokens, vit.norm.weight, vit.norm.bias):
            t.normal_()
    x = torch.randn(1, 3, 64, 96)
    with torch.no_grad():
        out = bb(x)

    def ln(t):  # the model's final LayerNorm, in float64
        return torch.nn.functional.layer_norm(
            t.double(), (t.shape[-1],), vit.norm.weight.detach().double(), vit.norm.bias.detach().double(), vit.norm.eps
        )

    assert torch.allclose(out.cls[0].double(), ln(vit.embeddings.cls_token[0, 0].detach()), atol=1e-5)
    conv = vit.embeddings.patch_embeddings
    Wp = conv.weight.detach().double().reshape(conv.out_channels, -1)  # (C, 3 * 16 * 16)
    for i in range(4):
        for j in range(6):
            block = x[0, :, 16 * i : 16 * (i + 1), 16 * j : 16 * (j + 1)].double().reshape(-1)  # (3 * 16 * 16,)
            ref = ln(Wp @ block + conv.bias.detach().double())
            assert torch.allclose(out.patch_grid[0, :, i, j].double(), ref, atol=1e-5), (i, j)
    # the register tokens come between the CLS and the patches, and are not part of the grid
    with torch.no_grad():
        tokens = vit(x)[0]  # (1 + R + 24, C)
    assert torch.allclose(tokens[1:5].double(), ln(vit.embeddings.register_tokens[0].detach()), atol=1e-5)
    y = x.clone()
    y[:, :, 32:48, 16:32] += 1.0  # patch row 2, patch column 1
    with torch.no_grad():
        diff = (bb(y).patch_grid - out.patch_grid).abs().amax(dim=1)[0]  # (4, 6)
    assert (diff > 1e-6).nonzero().tolist() == [[2, 1]]


def test_dinov3_train_mode_sees_the_inference_positional_encodings():
    """transformers' DINOv3 rescales its RoPE patch coordinates at random in train mode (``pos_embed_rescale``, 2.0 by
    default): training forwards would see other positional encodings than inference, while PARA's head reads features
    at exact pixels. Every preset switches it off (None); then a train-mode forward equals an eval-mode one, for the
    backbone and for the whole v4 model. With the transformers default it does not (why it is off)."""
    cfg = V4Config.tiny()
    for name in ("pos_embed_rescale", "pos_embed_shift", "pos_embed_jitter"):
        assert cfg.backbone_config.get(name) is None, name
    assert V4Config.pick_place().backbone_config["pos_embed_rescale"] is None
    assert V4Config.paper().backbone_config["pos_embed_rescale"] is None
    torch.manual_seed(0)
    x = torch.randn(2, 3, 64, 64)
    bb = build_backbone(cfg)
    with torch.no_grad():
        a, b = bb.train()(x), bb.eval()(x)
    assert torch.equal(a.patch_grid, b.patch_grid) and torch.equal(a.cls, b.cls)
    model = build_model(cfg)
    inp = make_inputs(cfg)
    with torch.no_grad():
        a, b = model.train()(inp), model.eval()(inp)
    assert torch.equal(a.volume_logits, b.volume_logits) and torch.equal(a.gripper_logits, b.gripper_logits)
    torch.manual_seed(1)  # its own weights and rescale draws: independent of how many numbers the model above took
    rescaled = build_backbone(_dinov3(pos_embed_rescale=2.0))
    with torch.no_grad():
        b = rescaled.eval()(x)
        gaps = [(rescaled.train()(x).patch_grid - b.patch_grid).abs().max().item() for _ in range(3)]
    assert max(gaps) > 1e-3, gaps
