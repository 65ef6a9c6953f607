"""Action labels: encode -> decode round trips (voxel within half a cell, rotation within half a bin), refinement."""

import numpy as np
import pytest
import torch
from core_fixtures import make_inputs, make_trajectory
from scipy.spatial.transform import Rotation

from para_core.model.actions import (
    decode_gripper,
    decode_outputs,
    decode_rotation,
    encode_gripper,
    encode_rotation,
    encode_targets,
    refine_positions,
    time_offsets,
)
from para_core.model.config import V4Config
from para_core.model.geometry import project
from para_core.model.model_io import V4Output
from para_core.model.voxels import build_voxel_grid


def _fake_output(cfg, grid, logits, grip_bins, rot_bins):
    B, T, V = logits.shape
    G, R = cfg.n_gripper_bins, cfg.n_rotation_bins
    gl = torch.nn.functional.one_hot(torch.as_tensor(grip_bins), G).float()
    rl = torch.nn.functional.one_hot(torch.as_tensor(rot_bins), R).float()
    z = torch.zeros(1)
    return V4Output(
        volume_logits=logits,
        voxel_xyz=grid.voxel_xyz,
        voxel_valid=grid.valid,
        voxel_feat=z,
        query=z,
        chosen_voxel=logits.argmax(-1),
        gripper_logits=gl,
        rotation_logits=rl,
        grid=grid,
        cls=z,
    )


@pytest.mark.parametrize(
    "cfg",
    [V4Config.tiny(), V4Config.tiny(pred_size=48, n_height_bins=32, n_window=8), V4Config.tiny(z_range_mode="fixed")],
    ids=["tiny", "finer", "fixed_z"],
)
def test_encode_decode_round_trip_within_half_a_voxel(cfg):
    B = 3
    inp = make_inputs(cfg, batch=B)
    grid = build_voxel_grid(cfg, inp.K_img.double(), inp.T_world_cam.double())
    pos, rot, grip = make_trajectory(cfg, batch=B, seed=3)
    tgt = encode_targets(cfg, grid, pos, rot, grip)
    assert (tgt.teacher_voxel >= 0).all()
    assert torch.allclose(tgt.voxel_weight.sum(-1), torch.ones(B, cfg.n_window))
    V = grid.voxel_xyz.shape[1]
    logits = torch.full((B, cfg.n_window, V), -5.0, dtype=torch.float64)
    logits[~grid.valid.unsqueeze(1).expand_as(logits)] = float("-inf")
    logits.scatter_(-1, tgt.teacher_voxel.unsqueeze(-1), 20.0)
    chunks = decode_outputs(cfg, _fake_output(cfg, grid, logits, tgt.gripper_bin, tgt.rotation_bins))
    Z, P = cfg.n_height_bins, cfg.pred_size
    for b, ch in enumerate(chunks):
        dec = torch.tensor(ch.positions_world)
        for t in range(cfg.n_window):
            k = tgt.teacher_voxel[b, t].item() // (Z * P * P)
            pts = torch.stack([dec[t], pos[b, t]]).unsqueeze(0)  # (1, 2, 3)
            uv, _ = project(pts, grid.K_pred[b, k], grid.T_world_cam[b, k])
            assert (uv[0, 0] - uv[0, 1]).abs().max() <= 0.5 + 1e-6  # half a pixel of the P x P grid
            dz = (grid.z_hi_per_view[b, k] - cfg.z_lo_m) / Z
            assert abs(dec[t, 2] - pos[b, t, 2]) <= dz / 2 + 1e-9  # half a height bin
        np.testing.assert_allclose(ch.gripper, grip[b])
        half_bin = cfg.rotation_range_rad / cfg.n_rotation_bins
        R_ref = Rotation.from_quat(cfg.rotation_ref_quat_xyzw).as_matrix()
        rv_gt = Rotation.from_matrix(R_ref.T @ rot[b]).as_rotvec()
        rv_dec = Rotation.from_matrix(R_ref.T @ ch.rotations_world).as_rotvec()
        assert np.abs(rv_gt - rv_dec).max() <= half_bin + 1e-9
        np.testing.assert_allclose(Rotation.from_quat(ch.quaternions_xyzw).as_matrix(), ch.rotations_world, atol=1e-9)
        np.testing.assert_allclose(ch.time_offsets_s, np.arange(cfg.n_window) * cfg.frame_stride / cfg.dataset_fps)
        assert (ch.confidence > 0.99).all()  # all mass on the decoded voxel (plus the other view's copy nearby)


def test_soft_target_covers_every_view_that_sees_the_point():
    cfg = V4Config.tiny()
    inp = make_inputs(cfg)
    grid = build_voxel_grid(cfg, inp.K_img, inp.T_world_cam)
    # A point right under the wrist camera (seen by both) and one far outside the wrist's view (scene only).
    pos = torch.tensor([[[0.33, 0.0, 0.05], [0.05, -0.3, 0.3]] + [[0.33, 0.0, 0.05]] * (cfg.n_window - 2)])
    rot = np.tile(np.diag([-1.0, 1.0, -1.0]), (1, cfg.n_window, 1, 1))
    tgt = encode_targets(cfg, grid, pos, rot, np.ones((1, cfg.n_window)))
    assert tgt.voxel_weight[0, 0].tolist() == [0.5, 0.5]
    assert tgt.voxel_weight[0, 1].tolist() == [1.0, 0.0]
    # the target voxels are the cells that contain the point: their centres are near it
    for k in range(2):
        xyz = grid.voxel_xyz[0, tgt.voxel_index[0, 0, k]]
        assert (xyz - pos[0, 0]).norm() < 0.06  # tiny grid: 5 cm bins, ~4 cm pixels


def test_rotation_bins_hand_numbers_and_clipping():
    cfg = V4Config.tiny(n_rotation_bins=12)  # bins of pi/6 over [-pi, pi]
    R_ref = np.diag([-1.0, 1.0, -1.0])
    assert np.array_equal(encode_rotation(cfg, R_ref), [6, 6, 6])  # r = 0 is the centre of bin 6 = 12 // 2
    yaw = Rotation.from_euler("z", -0.3).as_matrix()
    assert np.array_equal(encode_rotation(cfg, R_ref @ yaw), [6, 6, 5])
    np.testing.assert_allclose(
        Rotation.from_matrix(R_ref.T @ decode_rotation(cfg, [6, 6, 5])).as_rotvec(), [0.0, 0.0, -np.pi / 6], atol=1e-12
    )
    narrow = V4Config.tiny(rotation_range_rad=0.5, n_rotation_bins=10)
    assert encode_rotation(narrow, R_ref @ Rotation.from_euler("z", 1.0).as_matrix())[2] == 9


def test_gripper_bins():
    cfg = V4Config.tiny(n_gripper_bins=5)
    assert encode_gripper(cfg, [0.0, 0.2, 0.5, 0.9, 1.0, 1.7]).tolist() == [0, 1, 2, 4, 4, 4]
    np.testing.assert_allclose(decode_gripper(cfg, [0, 1, 4]), [0.0, 0.25, 1.0])


def test_time_offsets():
    cfg = V4Config.tiny(frame_stride=3, dataset_fps=15.0)
    np.testing.assert_allclose(time_offsets(cfg), [0.0, 0.2, 0.4, 0.6])


def test_refinement_is_local_soft_argmax():
    cfg = V4Config.tiny()
    inp = make_inputs(cfg)
    grid = build_voxel_grid(cfg, inp.K_img, inp.T_world_cam)
    Z, P = cfg.n_height_bins, cfg.pred_size
    v0 = (0 * Z + 3) * P * P + 8 * P + 8  # scene view, bin 3, row 8, col 8
    v1 = v0 + 1  # its right neighbour
    assert grid.valid[0, v0] and grid.valid[0, v1]
    logits = torch.full((1, 1, grid.voxel_xyz.shape[1]), -50.0)
    logits[0, 0, v0] = logits[0, 0, v1] = 10.0
    far = (1 * Z + 2) * P * P + 3 * P + 3  # a distant voxel in the other view is ignored by the local window
    logits[0, 0, far] = 9.0
    ref = refine_positions(cfg, logits, grid.voxel_xyz, torch.tensor([[v0]]))
    assert torch.allclose(ref[0, 0], (grid.voxel_xyz[0, v0] + grid.voxel_xyz[0, v1]) / 2, atol=1e-5)


@pytest.mark.parametrize("n_bins", [36, 35, 12, 9])
def test_reference_orientation_is_a_bin_centre(n_bins):
    """The top-down reference pose round-trips to 0.1 deg and keeps its bin under small noise, for even and odd bin
    counts (with the paper's 36 bins, r = 0 used to lie on a bin edge: 8.7 deg off, flipping under 1e-6 rad)."""
    cfg = V4Config.tiny(n_rotation_bins=n_bins)
    R_ref = Rotation.from_quat(cfg.rotation_ref_quat_xyzw).as_matrix()
    bins = encode_rotation(cfg, R_ref)
    assert bins.tolist() == [n_bins // 2] * 3
    err_deg = np.degrees(Rotation.from_matrix(R_ref.T @ decode_rotation(cfg, bins)).magnitude())
    assert err_deg < 0.1
    rng = np.random.default_rng(0)
    for _ in range(20):
        noise = Rotation.from_rotvec(rng.normal(scale=1e-3, size=3)).as_matrix()
        assert encode_rotation(cfg, R_ref @ noise).tolist() == [n_bins // 2] * 3


def _confidence_brute_force(cfg, logits, voxel_xyz, positions):
    """Every voxel, one by one in vectorised form: sum of softmax(logits) over voxels within the radius."""
    probs = torch.softmax(logits.double(), dim=-1)  # (B, T, V)
    B, T, _ = logits.shape
    out = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        for t in range(T):
            near = (voxel_xyz[b].double() - positions[b, t].double()).norm(dim=-1) <= cfg.confidence_radius_m
            out[b, t] = probs[b, t][near].sum()
    return out


@pytest.mark.parametrize(
    "cfg",
    [
        V4Config.tiny(),
        V4Config.tiny(pred_size=24, n_height_bins=48, n_window=6),
        V4Config.tiny(z_range_mode="fixed", confidence_radius_m=0.05),
        V4Config.tiny(n_height_bins=1),
    ],
    ids=["tiny", "many_bins", "fixed_z", "one_bin"],
)
def test_ball_confidence_equals_the_sum_over_every_voxel(cfg):
    """The windowed confidence visits only the bins near each point; a brute-force sum over all V voxels must agree,
    for points at voxel centres (many voxels on the sphere's edge), between them and off the grid, with peaked and
    flat logits. Catches a window too narrow (a bin of the ball skipped), a wrong bin -> voxel index, or mass from
    outside the radius."""
    from para_core.model.actions import ball_confidence

    B = 2
    inp = make_inputs(cfg, batch=B)
    grid = build_voxel_grid(cfg, inp.K_img.float(), inp.T_world_cam.float())
    V, T = grid.voxel_xyz.shape[1], cfg.n_window
    gen = torch.Generator().manual_seed(5)
    logits = torch.randn(B, T, V, generator=gen) * 3.0
    logits[~grid.valid.unsqueeze(1).expand_as(logits)] = float("-inf")
    picked = torch.randint(0, V, (B, T), generator=gen)  # (B, T) voxels to put the points at
    at_voxel = torch.gather(grid.voxel_xyz, 1, picked.unsqueeze(-1).expand(-1, -1, 3))
    positions = at_voxel + torch.randn(B, T, 3, generator=gen) * 0.01 * (torch.arange(T) % 2).view(1, T, 1)
    out = _fake_output(cfg, grid, logits, torch.zeros(B, T, dtype=torch.long), torch.zeros(B, T, 3, dtype=torch.long))
    got = ball_confidence(cfg, out, positions)
    ref = _confidence_brute_force(cfg, logits, grid.voxel_xyz, positions)
    assert ref.max() > 0.01  # the test has mass to find
    torch.testing.assert_close(got.double(), ref, atol=1e-5, rtol=1e-4)
