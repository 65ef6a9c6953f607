"""Policy: the contract API (random_init / from_checkpoint / predict), preprocessing, input validation."""

import numpy as np
import pytest
import torch

from para_core.data import synthetic as syn
from para_core.model.checkpoint import save_checkpoint
from para_core.model.config import V4Config
from para_core.model.policy import CameraObservation, Policy, PolicyOutput, RobotState

torch.set_num_threads(1)


def _obs(cfg, scene_hw=(480, 640), wrist_hw=(240, 320), seed=0):
    rng = np.random.default_rng(seed)
    (Hs, Ws), (Hw, Ww) = scene_hw, wrist_hw
    ee = np.array([0.3, 0.0, 0.2])
    cams = [
        CameraObservation(
            syn.random_image(rng, Hs, Ws), syn.intrinsics_from_fovy(Ws, Hs, 60.0), syn.scene_camera_pose()
        ),
        CameraObservation(
            syn.random_image(rng, Hw, Ww), syn.intrinsics_from_fovy(Ww, Hw, 80.0), syn.wrist_camera_pose(ee)
        ),
    ]
    T = np.eye(4)
    T[:3, :3] = syn.top_down_rotation()
    T[:3, 3] = ee
    return cams, RobotState(T, 1.0, np.tile(ee, (cfg.mv_past_n, 1)))


def test_random_init_predict_contract():
    cfg = V4Config.tiny()
    pol = Policy.random_init(cfg, device="cpu")
    assert pol.view_names == ("scene", "wrist") and pol.config is cfg and isinstance(pol.model_id, str)
    cams, state = _obs(cfg)
    out = pol.predict(cams, state)
    assert isinstance(out, PolicyOutput)
    T = cfg.n_window
    assert out.positions_world.shape == (T, 3) and out.quaternions_xyzw.shape == (T, 4)
    assert out.gripper.shape == (T,) and out.confidence.shape == (T,) and out.time_offsets_s.shape == (T,)
    np.testing.assert_allclose(np.linalg.norm(out.quaternions_xyzw, axis=1), 1.0)
    assert ((out.gripper >= 0) & (out.gripper <= 1)).all() and ((out.confidence >= 0) & (out.confidence <= 1)).all()
    np.testing.assert_allclose(out.time_offsets_s, np.arange(T) * cfg.frame_stride / cfg.dataset_fps)
    lo, hi = out.voxel_bounds_world
    assert lo[0] >= cfg.workspace_x_m[0] - 1e-6 and hi[0] <= cfg.workspace_x_m[1] + 1e-6
    assert lo[2] >= cfg.z_lo_m - 1e-6 and hi[2] <= cfg.z_hi_m + 1e-6
    assert ((out.positions_world >= lo - 1e-5) & (out.positions_world <= hi + 1e-5)).all()
    assert out.top_voxels_world.shape == (cfg.viz_top_k, 3) and out.top_voxels_prob.shape == (cfg.viz_top_k,)
    assert (np.diff(out.top_voxels_prob) <= 0).all()
    # deterministic for a fixed random seed
    out2 = Policy.random_init(cfg, device="cpu").predict(cams, state)
    np.testing.assert_array_equal(out.positions_world, out2.positions_world)


def test_preprocess_rescales_intrinsics_exactly():
    cfg = V4Config.tiny()
    pol = Policy.random_init(cfg, device="cpu")
    cams, state = _obs(cfg)
    inp = pol.preprocess(cams, state)
    S = cfg.img_size
    for k, cam in enumerate(cams):
        H, W = cam.image_rgb.shape[:2]
        K_ref = np.diag([S / W, S / H, 1.0]) @ cam.K
        np.testing.assert_allclose(inp.K_img[0, k].numpy(), K_ref, rtol=1e-6)
    assert inp.images.shape == (1, 2, 3, S, S)
    # ImageNet normalisation: a uniform grey image maps to (0.5 - mean) / std
    grey = [CameraObservation(np.full((32, 48, 3), 128, np.uint8), c.K, c.T_world_cam) for c in cams]
    x = pol.preprocess(grey, state).images[0, 0, :, 5, 5]
    np.testing.assert_allclose(
        x.numpy(), (128 / 255 - np.array([0.485, 0.456, 0.406])) / [0.229, 0.224, 0.225], rtol=1e-5
    )


def test_same_scene_at_two_resolutions_gives_same_voxel_grid():
    cfg = V4Config.tiny()
    pol = Policy.random_init(cfg, device="cpu")
    cams, state = _obs(cfg, scene_hw=(128, 128), wrist_hw=(64, 64))
    big = [
        CameraObservation(np.repeat(np.repeat(c.image_rgb, 2, 0), 2, 1), np.diag([2.0, 2.0, 1.0]) @ c.K, c.T_world_cam)
        for c in cams
    ]
    pol.predict(cams, state)
    xyz_small = pol.last_output.voxel_xyz.clone()
    pol.predict(big, state)
    assert torch.allclose(pol.last_output.voxel_xyz, xyz_small, atol=1e-6)


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_reduced_precision_runs(dtype):
    cfg = V4Config.tiny()
    cams, state = _obs(cfg)
    out = Policy.random_init(cfg, device="cpu", dtype=dtype).predict(cams, state)
    assert np.isfinite(out.positions_world).all()


def test_from_checkpoint_matches(tmp_path):
    cfg = V4Config.tiny()
    pol = Policy.random_init(cfg, device="cpu", seed=3)
    save_checkpoint(tmp_path / "c", pol.model, model_id="abc")
    pol2 = Policy.from_checkpoint(tmp_path / "c", device="cpu")
    assert pol2.model_id == "abc" and pol2.config == cfg
    cams, state = _obs(cfg)
    a, b = pol.predict(cams, state), pol2.predict(cams, state)
    np.testing.assert_array_equal(a.positions_world, b.positions_world)
    np.testing.assert_array_equal(a.top_voxels_prob, b.top_voxels_prob)


def _bad(cams, state, which):
    cams = list(cams)
    c0 = cams[0]
    if which == "n_cams":
        cams = cams[:1]
    elif which == "gray_image":
        cams[0] = CameraObservation(c0.image_rgb[..., 0], c0.K, c0.T_world_cam)
    elif which == "float_image":
        cams[0] = CameraObservation(c0.image_rgb.astype(np.float32), c0.K, c0.T_world_cam)
    elif which == "nan_K":
        K = c0.K.copy()
        K[0, 0] = np.nan
        cams[0] = CameraObservation(c0.image_rgb, K, c0.T_world_cam)
    elif which == "K_shape":
        cams[0] = CameraObservation(c0.image_rgb, c0.K[:2], c0.T_world_cam)
    elif which == "inf_pose":
        T = c0.T_world_cam.copy()
        T[0, 3] = np.inf
        cams[0] = CameraObservation(c0.image_rgb, c0.K, T)
    elif which == "scaled_pose":
        cams[0] = CameraObservation(c0.image_rgb, c0.K, c0.T_world_cam * 2)
    elif which == "past_shape":
        state = RobotState(state.T_world_ee, state.gripper, state.past_positions_world[:1])
    elif which == "nan_gripper":
        state = RobotState(state.T_world_ee, float("nan"), state.past_positions_world)
    return cams, state


@pytest.mark.parametrize(
    "which,fragment",
    [
        ("n_cams", "got 1 cameras; this policy needs 2"),
        ("gray_image", "pass (H, W, 3) RGB"),
        ("float_image", "dtype float32; pass uint8"),
        ("nan_K", "finite (3, 3)"),
        ("K_shape", "finite (3, 3)"),
        ("inf_pose", "non-finite"),
        ("scaled_pose", "not a rigid transform"),
        ("past_shape", "pass finite (2, 3) positions"),
        ("nan_gripper", "state.gripper"),
    ],
)
def test_bad_inputs_raise_clear_errors(which, fragment):
    cfg = V4Config.tiny()
    pol = Policy.random_init(cfg, device="cpu")
    cams, state = _bad(*_obs(cfg), which)
    with pytest.raises(ValueError) as exc:
        pol.predict(cams, state)
    assert fragment in str(exc.value)


def _predict_with_scene_camera_at(cfg, scene_z_m, policy=None):
    policy = policy or Policy.random_init(cfg, device="cpu")
    rng = np.random.default_rng(0)
    K = syn.intrinsics_from_fovy(32, 32, 60.0)
    scene = syn.scene_camera_pose(eye=(0.3, -0.55, scene_z_m))
    cams = [
        CameraObservation(syn.random_image(rng, 32, 32), K, scene),
        CameraObservation(syn.random_image(rng, 32, 32), K, syn.wrist_camera_pose()),
    ]
    T_ee = np.eye(4)
    T_ee[:3, 3] = (0.3, 0.0, 0.15)
    policy.predict(cams, RobotState(T_ee, 1.0, np.tile(T_ee[:3, 3], (cfg.mv_past_n, 1))))
    return policy


def test_scene_camera_below_the_height_range_is_warned_once():
    """PARA v4's sanity check: the scene camera should sit above z_hi (else its grid is clipped; likely a bad TF)."""
    import warnings

    cfg = V4Config.tiny()
    with pytest.warns(UserWarning, match="height range is clipped"):
        policy = _predict_with_scene_camera_at(cfg, cfg.z_hi_m - 0.05)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _predict_with_scene_camera_at(cfg, cfg.z_hi_m - 0.05, policy)  # once per policy, not at every frame


@pytest.mark.parametrize(
    "mode, margins_above_z_hi, clipped",
    [
        ("adaptive", 0.5, True),  # above z_hi, within the margin: clipped (the old check missed it)
        ("adaptive", 1.5, False),  # the whole range fits below the camera
        ("fixed", 0.5, False),  # fixed mode never clips: the camera is above every bin
        ("fixed", -2.0, True),  # ... but a camera below z_hi has bins above it
    ],
)
def test_scene_camera_warning_fires_exactly_when_the_range_is_clipped(mode, margins_above_z_hi, clipped):
    import warnings

    from para_core.model.geometry import adaptive_z_range

    cfg = V4Config.tiny().replace(z_range_mode=mode, cam_margin_m=0.05)
    cam_z = cfg.z_hi_m + margins_above_z_hi * cfg.cam_margin_m
    z_hi_k, _ = adaptive_z_range(
        torch.tensor([cam_z], dtype=torch.float64),
        cfg.z_lo_m,
        cfg.z_hi_m,
        cfg.cam_margin_m,
        cfg.n_height_bins,
        mode,
        cfg.min_z_span_m,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _predict_with_scene_camera_at(cfg, cam_z)
    messages = [str(w.message) for w in caught if "scene camera" in str(w.message)]
    assert (len(messages) == 1) == clipped, messages
    if clipped and mode == "adaptive":
        assert float(z_hi_k) < cfg.z_hi_m  # the reference says clipped too
        assert f"{float(z_hi_k):.3f}] m instead of" in messages[0]
