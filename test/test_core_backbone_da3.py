"""The Depth-Anything-3 backbone (``backbone_kind = "da3"``, PARA v4's v4_da3) on the official ``depth_anything_3``
code with random weights from configs: the camera convention against hand computations and DA3's own unprojection,
the features against the tokens DA3's own network hands its DPT head (the head's tensors across the paper presets:
test_core_backbone_vlm.py), cross-view attention and camera tokens in the
forward, the DA3-SMALL parameter count against a hand count, a v4 training step, checkpoints, a local release
directory, and the refusals."""

import dataclasses
import json
import math

import numpy as np
import pytest
import torch
from core_fixtures import make_inputs, make_trajectory

pytest.importorskip("depth_anything_3.model", reason="depth-anything-3 not installed (scripts/setup installs it)")

from para_core.model.backbone_da3 import DA3Backbone, DA3Network, da3_extrinsics, rigid_inverse  # noqa: E402
from para_core.model.backbones import BACKBONE_REGISTRY, count_parameters  # noqa: E402
from para_core.model.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from para_core.model.config import DA3_SMALL, DA3_TINY, V4Config  # noqa: E402
from para_core.model.registry import build_model  # noqa: E402

torch.set_num_threads(1)


def _tiny(**overrides) -> V4Config:
    return V4Config.tiny(backbone_kind="da3", **overrides)


def _pose(R: np.ndarray, t) -> torch.Tensor:
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, t
    return torch.tensor(T, dtype=torch.float64)


def _sample(cfg, seed=0, batch=1):
    from para_core.model.actions import encode_targets
    from para_core.model.voxels import build_voxel_grid

    inp = make_inputs(cfg, batch=batch, seed=seed)
    grid = build_voxel_grid(cfg, inp.K_img, inp.T_world_cam)
    pos, rot, grip = make_trajectory(cfg, batch=batch, seed=seed)
    return inp, encode_targets(cfg, grid, pos, rot, grip)


# ------------------------------------------------------------------------------------------- presets and the head
def test_registered_and_presets():
    assert BACKBONE_REGISTRY["da3"] is DA3Backbone
    cfg = _tiny()
    assert (cfg.backbone_kind, cfg.patch_size, cfg.img_size, cfg.backbone_config) == ("da3", 14, 56, DA3_TINY)
    paper, da3 = V4Config.paper(), V4Config.paper_da3()
    assert (da3.backbone_kind, da3.patch_size, da3.img_size, da3.patch_grid) == ("da3", 14, 504, 36)
    a, b = paper.to_flat_dict(), da3.to_flat_dict()
    differ = {k for k in a if a[k] != b[k]}
    assert differ == {"name", "backbone_kind", "backbone_config", "patch_size", "img_size"}  # the head is v4's
    assert V4Config.from_json(da3.to_json()) == da3
    assert V4Config.preset("paper_da3") == da3


def _vit_block_params(C: int, mlp: int, qk_head_dim: int = 0) -> int:
    """One DINOv2-style block: 2 LayerNorms, qkv + proj with biases, 2 layer scales, GELU MLP, optional QK-norms."""
    return 2 * 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (C * mlp + mlp) + (mlp * C + C) + 4 * qk_head_dim


def test_da3_small_parameter_count_by_hand():
    C, L, heads, p, side = 384, 12, 6, 14, 518 // 14
    vit = 3 * p * p * C + C  # patch embedding
    vit += C + 2 * C + (side * side + 1) * C  # CLS, the two learned camera tokens, position table
    vit += sum(_vit_block_params(C, 4 * C, C // heads if i >= 4 else 0) for i in range(L))  # QK-norm from layer 4
    vit += 2 * C  # final norm
    cam_enc = 4 * _vit_block_params(C, 4 * C) + 2 * 2 * C + (9 * 192 + 192) + (192 * C + C)  # trunk, 2 norms, MLP
    net = DA3Network(DA3_SMALL)
    assert count_parameters(net.pretrained) == vit
    assert count_parameters(net.cam_enc) == cam_enc
    assert vit + cam_enc == 29_237_504  # docs/benchmarks.md


# ---------------------------------------------------------------------------------------------- camera convention
def test_da3_extrinsics_of_a_known_pose_pair_by_hand():
    """View 0 looks straight down from 1 m; view 1 is 0.5 m along world x, turned 90 degrees about its optical
    axis. DA3's extrinsics (world -> camera) relative to view 0, translations / max(lower median distance, 0.1)."""
    R0 = np.diag([1.0, -1.0, -1.0])  # camera x = world x, camera y = -world y, optical axis = -world z
    Rz90 = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # about the optical axis
    R1 = R0 @ Rz90
    T = torch.stack([_pose(R0, [0.2, 0.1, 1.0]), _pose(R1, [0.7, 0.1, 1.0])])[None]  # (1, 2, 4, 4)
    got = da3_extrinsics(T)[0]
    # By hand: E_k = inv(T_k) @ T_0. E_0 = I. E_1 = [R1^T R0, R1^T (t0 - t1)], R1^T R0 = Rz90^T;
    # t0 - t1 = (-0.5, 0, 0) in the world; R0^T maps it to (-0.5, 0, 0) in camera 0, Rz90^T to (0, 0.5, 0).
    # Camera distances from view 0: [0, 0.5]; torch's lower median is 0 -> the divisor is clamp(0, 0.1) = 0.1.
    E1 = np.eye(4)
    E1[:3, :3] = Rz90.T
    E1[:3, 3] = [0.0, 0.5 / 0.1, 0.0]
    np.testing.assert_allclose(got[0].numpy(), np.eye(4), atol=1e-12)
    np.testing.assert_allclose(got[1].numpy(), E1, atol=1e-12)
    # Three views: distances [0, 0.5, 2.0] -> median 0.5, so translations are in units of 0.5 m.
    T3 = torch.cat([T, _pose(R0, [0.2, 2.1, 1.0])[None, None]], dim=1)
    got3 = da3_extrinsics(T3)[0]
    np.testing.assert_allclose(got3[1, :3, 3].numpy(), [0.0, 1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(got3[2, :3, 3].numpy(), R0.T @ np.array([0.0, -2.0, 0.0]) / 0.5, atol=1e-12)


def test_da3_unprojects_the_package_projection_to_the_same_point():
    """DA3's own geometry (OpenCV pinhole with K, world -> camera extrinsics) takes the pixel and depth at which the
    package projects a world point back to that point: in the world with the raw extrinsics inv(T_world_cam), and in
    view 0's frame scaled by 1 / s with :func:`da3_extrinsics`."""
    from depth_anything_3.utils.geometry import (
        affine_inverse,
        camera_space_to_world_space,
        pixel_space_to_camera_space,
    )

    from para_core.model.geometry import project

    cfg = _tiny()
    inp = make_inputs(cfg, batch=1)
    T, K = inp.T_world_cam.double(), inp.K_img.double()  # (1, 2, 4, 4), (1, 2, 3, 3)
    X = torch.tensor([[0.35, 0.05, 0.1]], dtype=torch.float64)  # (1, 3) world point both cameras see
    ext = da3_extrinsics(T)  # (1, 2, 4, 4)
    s = 0.1  # two views: the divisor is 0.1 (test above)
    X0 = (rigid_inverse(T[0, 0]) @ torch.cat([X[0], X.new_ones(1)]))[:3] / s  # X in view 0's frame, scaled
    for k in range(2):
        uv, depth = project(X, K[0, k], T[0, k])  # (1, 2), (1,)
        assert depth.item() > 0
        pix = uv.reshape(1, 1, 2)  # (h, w, 2)
        cam = pixel_space_to_camera_space(pix, depth.reshape(1, 1, 1, 1, 1), K[:, k : k + 1])  # (1, 1, 1, 1, 3)
        world = camera_space_to_world_space(cam, affine_inverse(rigid_inverse(T[:, k : k + 1])))
        np.testing.assert_allclose(world.reshape(3).numpy(), X[0].numpy(), atol=1e-9)
        cam_s = pixel_space_to_camera_space(pix, (depth / s).reshape(1, 1, 1, 1, 1), K[:, k : k + 1])
        world_s = camera_space_to_world_space(cam_s, affine_inverse(ext[:, k : k + 1]))
        # the fixture's float32 rotations are orthonormal to ~1e-7, and rigid_inverse uses R^T
        np.testing.assert_allclose(world_s.reshape(3).numpy(), X0.numpy(), atol=1e-6)


# ------------------------------------------------------------------------------------------------------- features
def test_features_are_what_da3_hands_its_dpt_head():
    """DA3's own network (``DepthAnything3Net`` with its DinoV2 wrapper, a DualDPT head and camera decoder) run on
    the same views with the converted poses: our patch grid is the last tensor its DPT head receives, our global token
    the camera token its camera decoder receives. The v4 model holds no DPT head."""
    from depth_anything_3.model.cam_dec import CameraDec
    from depth_anything_3.model.da3 import DepthAnything3Net
    from depth_anything_3.model.dinov2.dinov2 import DinoV2
    from depth_anything_3.model.dualdpt import DualDPT

    torch.manual_seed(0)
    cfg = _tiny()
    model = build_model(cfg).eval()
    bb = model.backbone
    assert not [m for m in model.modules() if type(m).__name__ in ("DPT", "DualDPT", "GSDPT", "CameraDec")]
    C = bb.hidden_size
    wrapper = DinoV2("vits", out_layers=[0, 1, 2, cfg.backbone_config["feature_layer"]], alt_start=2)
    wrapper.pretrained = bb.net.pretrained  # the same ViT (DA3's wrapper only selects the out layers)
    da3 = DepthAnything3Net(
        net=wrapper,
        head=DualDPT(dim_in=C, features=8, out_channels=[8, 8, 8, 8]),
        cam_dec=CameraDec(dim_in=C),
        cam_enc=bb.net.cam_enc,
    ).eval()
    seen = {}

    def keep(name):
        def hook(module, args):
            seen[name] = args[0]  # the module's first input, unchanged

        return hook

    da3.head.register_forward_pre_hook(keep("feats"))
    da3.cam_dec.register_forward_pre_hook(keep("cam"))
    inp = make_inputs(cfg, batch=2)
    with torch.no_grad():
        out = bb.forward_views(inp.images, inp.K_img, inp.T_world_cam)
        da3(inp.images, extrinsics=da3_extrinsics(inp.T_world_cam), intrinsics=inp.K_img)
    B, N, h = 2, cfg.n_views, cfg.patch_grid
    head_in = seen["feats"][-1][0]  # (B, N, h*w, C)
    want_grid = head_in.reshape(B * N, h, h, C).permute(0, 3, 1, 2)
    torch.testing.assert_close(out.patch_grid, want_grid, rtol=0, atol=0)
    torch.testing.assert_close(out.cls, seen["cam"].reshape(B * N, C), rtol=0, atol=0)


def _view_features(model, inp):
    with torch.no_grad():
        out = model.backbone.forward_views(inp.images, inp.K_img, inp.T_world_cam)
    return out.patch_grid.reshape(inp.images.shape[0], -1, *out.patch_grid.shape[1:])  # (B, N, C, h, w)


def test_cross_view_attention_and_camera_tokens_reach_the_features():
    torch.manual_seed(0)
    model = build_model(_tiny()).eval()
    inp = make_inputs(model.config, batch=1)
    base = _view_features(model, inp)
    # another image in view 1 changes view 0's features: the views are attended together, not one at a time
    other = dataclasses.replace(inp, images=inp.images.clone())
    other.images[:, 1] = torch.flip(other.images[:, 1], dims=[-1])
    assert not torch.allclose(_view_features(model, other)[:, 0], base[:, 0], atol=1e-4)
    # a camera moved by 5 cm changes the features of both views (their camera tokens)
    moved = dataclasses.replace(inp, T_world_cam=inp.T_world_cam.clone())
    moved.T_world_cam[:, 1, 0, 3] += 0.05
    changed = _view_features(model, moved)
    assert not torch.allclose(changed[:, 0], base[:, 0], atol=1e-4)
    assert not torch.allclose(changed[:, 1], base[:, 1], atol=1e-4)
    # the same rigid motion of the whole rig (world frame only) leaves them alone: DA3 sees relative poses
    c, s = math.cos(0.5), math.sin(0.5)
    shift = _pose(np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]), [0.3, -0.2, 0.1]).float()
    rig = dataclasses.replace(inp, T_world_cam=shift @ inp.T_world_cam)
    torch.testing.assert_close(_view_features(model, rig), base, rtol=1e-4, atol=1e-4)
    # without camera poses the pose does not reach the features
    cfg = _tiny(backbone_config={**DA3_TINY, "use_camera_poses": False})
    no_pose = build_model(cfg).eval()
    torch.testing.assert_close(_view_features(no_pose, moved), _view_features(no_pose, inp), rtol=0, atol=0)


# ---------------------------------------------------------------------------------- training step and checkpoints
def test_v4_training_step_from_two_posed_views():
    torch.manual_seed(0)
    cfg = _tiny()
    model = build_model(cfg).train()
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    assert list(frozen) == ["backbone.net.pretrained.camera_token"]  # the no-pose fallback tokens only
    inp, tgt = _sample(cfg, batch=2)
    opt = torch.optim.AdamW(model.param_groups(), lr=1e-3)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    out = model(inp, tgt)
    assert out.volume_logits.shape == (2, cfg.n_window, cfg.n_voxels)
    assert out.cls.shape == (2, cfg.n_views, 2 * DA3_TINY["embed_dim"])
    assert all(torch.isfinite(v).all() for v in out.losses.values())
    out.losses["loss"].backward()
    no_grad = [
        n for n, p in model.named_parameters() if p.requires_grad and (p.grad is None or p.grad.abs().sum() == 0)
    ]
    assert no_grad == []  # ViT, camera encoder and head all reached
    opt.step()
    for n, p in model.named_parameters():
        assert torch.equal(p, before[n]) == (n in frozen), n
    groups = {g["name"]: g for g in model.param_groups()}
    assert sum(p.numel() for p in groups["backbone"]["params"]) == count_parameters(model.backbone) - 2 * 32


def test_checkpoint_roundtrip_identical_outputs(tmp_path):
    torch.manual_seed(1)
    cfg = _tiny()
    model = build_model(cfg).eval()
    path = save_checkpoint(tmp_path / "ckpt", model)
    assert json.loads((path / "config.json").read_text())["config"]["backbone"]["backbone_kind"] == "da3"
    loaded, cfg2, _ = load_checkpoint(path, expected_kind="para_v4")
    assert cfg2 == cfg and isinstance(loaded.backbone, DA3Backbone)
    inp = make_inputs(cfg, batch=2)
    with torch.no_grad():
        a, b = model(inp), loaded(inp)
    assert torch.equal(a.volume_logits, b.volume_logits) and torch.equal(a.cls, b.cls)
    assert torch.equal(a.gripper_logits, b.gripper_logits) and torch.equal(a.rotation_logits, b.rotation_logits)


# --------------------------------------------------------------------------------------------- a local DA3 release
def _write_release(path, net: DA3Network, model_name="da3-small", drop=(), extra_head=True):
    from safetensors.torch import save_file

    path.mkdir(parents=True, exist_ok=True)
    state = {}
    for k, v in net.state_dict().items():
        key = ("model.cam_enc." + k[len("cam_enc.") :]) if k.startswith("cam_enc.") else "model.backbone." + k
        if key not in drop:
            state[key] = v.contiguous()
    if extra_head:  # a release also holds its DPT head and camera decoder; they are not read
        state["model.head.scratch.output_conv1.weight"] = torch.zeros(4, 4)
        state["model.cam_dec.fc_t.weight"] = torch.zeros(3, 4)
    save_file(state, str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps({"model_name": model_name}))
    return path


@pytest.fixture(scope="module")
def da3_small_release(tmp_path_factory):
    torch.manual_seed(3)
    net = DA3Network(DA3_SMALL)
    return net, _write_release(tmp_path_factory.mktemp("da3") / "DA3-SMALL", net)


def test_pretrained_release_dir_and_self_contained_checkpoint(tmp_path, da3_small_release):
    net, path = da3_small_release
    cfg = V4Config.tiny(
        backbone_kind="da3", backbone_config=dict(DA3_SMALL), backbone_pretrained_dir=str(path), img_size=56
    )
    model = build_model(cfg)
    a, b = net.state_dict(), model.backbone.net.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    ckpt = save_checkpoint(tmp_path / "ckpt", model)
    meta = json.loads((ckpt / "config.json").read_text())["config"]["backbone"]
    assert meta["backbone_pretrained_dir"] == "" and meta["backbone_config"] == DA3_SMALL
    loaded, _, _ = load_checkpoint(ckpt, expected_kind="para_v4")
    c = loaded.backbone.net.state_dict()
    assert all(torch.equal(a[k], c[k]) for k in a)


def test_pretrained_dir_refusals(tmp_path, da3_small_release):
    net, good = da3_small_release

    def build(path):
        return build_model(
            V4Config.tiny(backbone_kind="da3", backbone_config=dict(DA3_SMALL), backbone_pretrained_dir=str(path))
        )

    with pytest.raises(ValueError, match="not a local directory.*huggingface-cli download"):
        build("depth-anything/DA3-SMALL")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="has no config.json"):
        build(tmp_path / "empty")
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "config.json").write_text(json.dumps({"model_name": "da3-small"}))
    (pickled / "model.pt").write_bytes(b"not read")
    with pytest.raises(ValueError, match="only safetensors are loaded"):
        build(pickled)
    dino = tmp_path / "dino"
    dino.mkdir()
    (dino / "config.json").write_text(json.dumps({"model_type": "dinov3_vit"}))
    (dino / "model.safetensors").write_bytes(b"x")  # never opened: config.json is refused first
    with pytest.raises(ValueError, match="model_name None.*'dinov3_vit'.*not a Depth-Anything-3 release"):
        build(dino)
    mono = tmp_path / "mono"
    mono.mkdir()
    (mono / "config.json").write_text(json.dumps({"model_name": "da3mono-large"}))
    (mono / "model.safetensors").write_bytes(b"x")
    with pytest.raises(ValueError, match="'da3mono-large', which has no cross-view layers and camera encoder"):
        build(mono)
    broken = _write_release(tmp_path / "broken", net, drop=("model.backbone.pretrained.blocks.7.attn.qkv.weight",))
    with pytest.raises(ValueError, match=r"missing \['pretrained.blocks.7.attn.qkv.weight'\].*download it again"):
        build(broken)
    other = tmp_path / "named_base"  # config.json names a bigger release than its tensors
    other.mkdir()
    (other / "model.safetensors").symlink_to(good / "model.safetensors")
    (other / "config.json").write_text(json.dumps({"model_name": "da3-base"}))
    with pytest.raises(ValueError, match="wrong shape"):
        build(other)


# ----------------------------------------------------------------------------------------------------- refusals
def test_validation_and_input_refusals():
    with pytest.raises(ValueError, match=r"keys \['hidden_size'\] are unknown.*DA3_SMALL"):
        _tiny(backbone_config={**DA3_TINY, "hidden_size": 64})
    with pytest.raises(ValueError, match="feature_layer.*first cross-view layer 3"):
        _tiny(backbone_config={**DA3_TINY, "feature_layer": 2})
    with pytest.raises(ValueError, match="alt_start"):
        _tiny(backbone_config={**DA3_TINY, "alt_start": 4})
    with pytest.raises(ValueError, match="cam_enc_num_heads.*must divide embed_dim=32"):
        _tiny(backbone_config={**DA3_TINY, "cam_enc_num_heads": 3})
    with pytest.raises(ValueError, match="patch_size = 16.*set patch_size=14"):
        _tiny(patch_size=16, img_size=64)
    with pytest.raises(ValueError, match="'para_dino_kv' runs its backbone one view at a time"):
        V4Config.tiny_dino_kv(backbone_kind="da3", backbone_config=dict(DA3_TINY), patch_size=14, img_size=56)
    model = build_model(_tiny()).eval()
    inp = make_inputs(model.config, batch=1)
    with pytest.raises(ValueError, match="built for 2 view.*pass all 2 views"):
        model.backbone.forward_views(inp.images[:, :1], inp.K_img[:, :1], inp.T_world_cam[:, :1])
    with pytest.raises(ValueError, match="call forward_views"):
        model.backbone(inp.images[:, 0])
    with pytest.raises(ValueError, match="pass K_img and T_world_cam"):
        model.image_features(inp.images)
    with torch.no_grad():
        assert math.isfinite(float(model(inp).volume_logits.max()))


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
