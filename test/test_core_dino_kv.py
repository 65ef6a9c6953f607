"""The single-view dino_kv head: a hand-built single-peak volume decodes to the ray-plane point (independent maths),
factorised logits equal a brute-force loop, the tiny preset overfits one sample, checkpoint round trip, and the
Policy / trainer dispatch on it with nothing v4-specific."""

import math

import numpy as np
import pytest
import torch
from core_fixtures import make_inputs, make_trajectory

from para_core.model.actions import decode_outputs, encode_targets
from para_core.model.checkpoint import load_checkpoint, save_checkpoint
from para_core.model.config import V4Config
from para_core.model.dino_kv import ParaDinoKVModel, step_embedding
from para_core.model.layers import sincos_height_encoding
from para_core.model.registry import build_model
from para_core.model.voxels import build_voxel_grid


@pytest.fixture
def cfg():
    return V4Config.tiny_dino_kv()


def test_needs_one_view():
    with pytest.raises(ValueError, match="ONE view"):
        build_model(V4Config.tiny(model_kind="para_dino_kv"))


def test_single_peak_decodes_to_the_ray_plane_intersection(cfg):
    torch.manual_seed(0)
    model = build_model(cfg).eval()
    inp = make_inputs(cfg, batch=1)
    with torch.no_grad():
        out = model(inp)
    Z, P, T = cfg.n_height_bins, cfg.pred_size, cfg.n_window
    valid = out.voxel_valid[0].nonzero().squeeze(-1)
    v = int(valid[len(valid) // 3])  # some valid voxel
    z, row, col = v // (P * P), (v // P) % P, v % P
    logits = torch.full_like(out.volume_logits, -30.0)
    logits[0, 2, v] = 30.0  # the peak at (t=2, z, u=col, v=row)
    out.volume_logits = logits
    chunk = decode_outputs(cfg, out)[0]
    # independent: the ray through the centre of grid pixel (col, row) of the P x P grid meets the plane of bin z
    S = cfg.img_size
    K = inp.K_img[0, 0].double().numpy().copy()
    K[:2] *= P / S  # intrinsics of the P x P grid (pixel centres at +0.5: exact scaling)
    T = inp.T_world_cam[0, 0].double().numpy()
    d_cam = np.linalg.solve(K, [col + 0.5, row + 0.5, 1.0])
    d_world = T[:3, :3] @ d_cam
    grid = build_voxel_grid(cfg, inp.K_img, inp.T_world_cam)
    z_lo, z_hi = cfg.z_lo_m, float(grid.z_hi_per_view[0, 0])
    height = z_lo + (z + 0.5) * (z_hi - z_lo) / Z  # bin centre
    s = (height - T[2, 3]) / d_world[2]
    expected = T[:3, 3] + s * d_world
    np.testing.assert_allclose(chunk.positions_world[2], expected, atol=1e-5)
    assert chunk.voxel_index[2] == v


def test_factorised_logits_equal_a_brute_force_loop(cfg):
    torch.manual_seed(1)
    model = build_model(cfg).eval()
    inp = make_inputs(cfg, batch=1, seed=3)
    with torch.no_grad():
        out = model(inp)
        F, _ = model.pixel_features(inp.images)  # (1, F, P, P)
    Z, P, D = cfg.n_height_bins, cfg.pred_size, cfg.feat_dim
    heights = out.voxel_xyz[0].reshape(Z, P * P, 3)[:, 0, 2]  # (Z,)
    rng = np.random.default_rng(0)
    for _ in range(12):
        t, z, u, v = (int(rng.integers(0, n)) for n in (cfg.n_window, Z, P, P))
        idx = z * P * P + v * P + u
        if not bool(out.voxel_valid[0, idx]):
            continue
        # the key by the paper's formula, written out: unit(t_emb[t] + h_emb[z]), sin/cos pairs
        t_emb = [math.sin(t * math.exp(-math.log(100.0) * 2 * i / D)) for i in range(D // 2)] + [
            math.cos(t * math.exp(-math.log(100.0) * 2 * i / D)) for i in range(D // 2)
        ]
        zn = (float(heights[z]) - cfg.z_lo_m) / (cfg.z_hi_m - cfg.z_lo_m)
        h_emb = [math.sin(2**k * math.pi * zn) for k in range(D // 2)] + [
            math.cos(2**k * math.pi * zn) for k in range(D // 2)
        ]
        key = np.add(t_emb, h_emb)
        key /= np.linalg.norm(key)
        f = F[0, :, v, u].double().numpy()
        assert np.linalg.norm(f) == pytest.approx(1.0, abs=1e-5)
        want = math.exp(float(model.logit_log_scale.detach())) * float(f @ key)
        assert float(out.volume_logits[0, t, idx]) == pytest.approx(want, abs=1e-4)
    # the helpers match the formula above too
    np.testing.assert_allclose(
        step_embedding(3, 4)[2].numpy(), [math.sin(2), math.sin(2 / 10), math.cos(2), math.cos(2 / 10)], atol=1e-6
    )
    assert sincos_height_encoding(torch.tensor([0.0]), 0.0, 1.0, 4).tolist()[0] == pytest.approx([0, 0, 1, 1])


def test_tiny_dino_kv_overfits_one_sample(cfg):
    torch.manual_seed(0)
    model = build_model(cfg).train()
    inp = make_inputs(cfg, batch=1)
    grid = build_voxel_grid(cfg, inp.K_img, inp.T_world_cam)
    pos, rot, grip = make_trajectory(cfg, batch=1)
    tgt = encode_targets(cfg, grid, pos, rot, grip)
    assert (tgt.teacher_voxel >= 0).all()
    opt = torch.optim.Adam(model.param_groups(), lr=1e-2)
    first = None
    for _ in range(150):
        out = model(inp, tgt)
        opt.zero_grad()
        out.losses["loss"].backward()
        opt.step()
        first = first if first is not None else out.losses["loss"].item()
    assert out.losses["loss"].item() < 0.3 * first
    model.eval()
    with torch.no_grad():
        out = model(inp)
    am = out.volume_logits.argmax(-1)[0]
    hits = sum(int(am[t]) == int(tgt.teacher_voxel[0, t]) for t in range(cfg.n_window))
    assert hits >= cfg.n_window - 1, (am.tolist(), tgt.teacher_voxel.tolist())


def test_checkpoint_round_trip_and_policy_dispatch(cfg, tmp_path):
    from para_core.model.policy import CameraObservation, Policy, RobotState

    torch.manual_seed(2)
    model = build_model(cfg).eval()
    save_checkpoint(tmp_path / "ck", model, cfg)
    loaded, cfg2, meta = load_checkpoint(tmp_path / "ck")
    assert isinstance(loaded, ParaDinoKVModel) and meta["model_kind"] == "para_dino_kv"
    inp = make_inputs(cfg, batch=1, seed=4)
    with torch.no_grad():
        a, b = model(inp).volume_logits, loaded(inp).volume_logits
    assert torch.equal(a, b)
    policy = Policy.from_checkpoint(tmp_path / "ck")
    img = ((inp.images[0, 0].permute(1, 2, 0).numpy() * 0.225 + 0.45) * 255).clip(0, 255).astype(np.uint8)
    out = policy.predict(
        [CameraObservation(img, inp.K_img[0, 0].double().numpy(), inp.T_world_cam[0, 0].double().numpy())],
        RobotState(inp.T_world_ee[0].double().numpy(), 1.0, inp.past_positions_world[0].double().numpy()),
    )
    assert out.positions_world.shape == (cfg.n_window, 3) and np.isfinite(out.positions_world).all()
    assert out.top_voxels_world.shape[1] == 3
