"""Rig randomisation of the demonstrations (para_ros.sim.rig_randomisation): every draw within its range, the same
seed the same rig, the simulator showing what was drawn (wrist pose against forward kinematics, colours in the
render, distractors visible but outside the physics), and bad ranges refused before anything runs."""

from __future__ import annotations

import argparse
import colorsys
import json
import math

import numpy as np
import pytest

from para_ros.sim.pick_place import sample_layout
from para_ros.sim.rig_randomisation import (
    RigRandomisation,
    add_rig_arguments,
    apply_rig,
    nominal_rig,
    rig_from_args,
)

SEEDS = range(200)


def _rpy_deg(R: np.ndarray) -> np.ndarray:
    """Roll, pitch, yaw (deg) of R = Rz @ Ry @ Rx, recovered independently of the sampler."""
    pitch = math.asin(-R[2, 0])
    roll = math.atan2(R[2, 1], R[2, 2])
    yaw = math.atan2(R[1, 0], R[0, 0])
    return np.degrees([roll, pitch, yaw])


def _hue_in(hue_deg: float, lo: float, hi: float) -> bool:
    if hi - lo >= 360.0:
        return True
    return any(lo - 1e-6 <= hue_deg + k * 360.0 <= hi + 1e-6 for k in (-2, -1, 0, 1, 2))


def test_every_draw_within_its_range():
    r = RigRandomisation(wrist_mount_xyz_m=0.003, wrist_mount_rpy_deg=3.0, cube_hue_deg=(-30, 30), n_distractors=(1, 3))
    counts = set()
    for seed in SEEDS:
        rig = r.sample(seed)
        T = np.asarray(rig.wrist_mount_offset_T)
        assert np.all(np.abs(T[:3, 3]) <= 0.003 + 1e-12)
        assert np.all(np.abs(_rpy_deg(T[:3, :3])) <= 3.0 + 1e-9)
        assert 55.0 <= rig.wrist_fovy_deg <= 61.0
        for key, rgba in (("cube", rig.cube_rgba), ("pad", rig.pad_rgba), ("table", rig.table_rgba)):
            h, s, v = colorsys.rgb_to_hsv(*rgba[:3])
            assert _hue_in(360.0 * h, *getattr(r, f"{key}_hue_deg")) or s < 1e-9, (key, seed, h)
            assert r.__dict__[f"{key}_saturation"][0] - 1e-9 <= s <= r.__dict__[f"{key}_saturation"][1] + 1e-9
            assert r.__dict__[f"{key}_value"][0] - 1e-9 <= v <= r.__dict__[f"{key}_value"][1] + 1e-9
        for lamp in rig.lamps:
            assert 0.6 <= lamp["scale"] <= 1.4
            assert all(0.9 - 1e-12 <= t <= 1.1 + 1e-12 for t in lamp["tint"])
            assert 0.0 <= lamp["turn_deg"] <= 20.0
        assert 0.25 <= rig.ambient <= 0.45
        assert 1 <= len(rig.distractors) <= 3
        counts.add(len(rig.distractors))
        layout = sample_layout(seed)
        keep = [np.asarray(layout.cube_xy_m), np.asarray(layout.target_xy_m)] + [
            np.asarray(d["xy_m"]) for d in rig.distractors
        ]
        for i in range(len(keep)):  # brute force: every pair of (cube, pad, distractors) at least the clearance apart
            for j in range(max(i + 1, 2), len(keep)):
                assert np.linalg.norm(keep[i] - keep[j]) >= 0.08 - 1e-12
        assert all(d["shape"] in ("sphere", "cylinder") for d in rig.distractors)  # never a second cube
    assert counts == {1, 2, 3}  # the whole range is used


def test_same_seed_same_rig_other_seed_other_rig():
    r = RigRandomisation()
    a, b, c = r.sample(7).to_dict(), r.sample(7).to_dict(), r.sample(8).to_dict()
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert a["cube_rgba"] != c["cube_rgba"] and a["wrist_mount_offset_T"] != c["wrist_mount_offset_T"]


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"cube_value": (0.9, 0.2)}, "cube_value"),
        ({"light_scale": (-0.5, 1.0)}, "light_scale"),
        ({"wrist_mount_xyz_m": -0.001}, "wrist_mount_xyz_m"),
        ({"wrist_mount_rpy_deg": 40.0}, "wrist_mount_rpy_deg"),
        ({"n_distractors": (0.5, 2.0)}, "whole numbers"),
        ({"wrist_fovy_deg": (float("nan"), 60.0)}, "wrist_fovy_deg"),
    ],
)
def test_bad_ranges_are_refused_naming_the_field(changes, words):
    with pytest.raises(ValueError, match=words):
        RigRandomisation(**changes)


def _parse(argv):
    p = argparse.ArgumentParser()
    add_rig_arguments(p)
    return p.parse_args(argv)


def test_command_line_ranges():
    assert rig_from_args(_parse([])) is None
    r = rig_from_args(_parse(["--randomise-rig", "--rig-range", "light_scale=0.8,1.2", "--rig-range", "light-tint=0"]))
    assert r.light_scale == (0.8, 1.2) and r.light_tint == 0.0
    for argv, words in (
        (["--randomise-rig", "--rig-range", "colour=1,2"], "NAME one of"),
        (["--randomise-rig", "--rig-range", "light_scale=1"], "LO,HI"),
        (["--randomise-rig", "--rig-range", "light_scale=a,b"], "not a number"),
        (["--rig-range", "light_scale=0.8,1.2"], "needs --randomise-rig"),
        (["--randomise-rig", "--rig-range", "light_scale=1.5,1.0"], "low <= high"),
    ):
        with pytest.raises(ValueError, match=words):
            rig_from_args(_parse(argv))


@pytest.fixture(scope="module")
def sim():
    from para_ros.sim.yam_scene import SimConfig, YamSim

    s = YamSim(SimConfig(n_distractor_slots=2))
    yield s
    s.close()


def test_the_simulator_shows_the_drawn_rig(sim):
    from para_ros.sim.yam_scene import WRIST_CAM_POS_IN_GRIPPER_M, WRIST_CAM_QUAT_WXYZ_IN_GRIPPER

    r = RigRandomisation(n_distractors=(2, 2), cube_saturation=(0.9, 1.0), cube_value=(0.8, 1.0), light_tint=0.0)
    rig = r.sample(3)
    apply_rig(sim, rig)
    sim.reset(seed=3)  # a reset keeps the rig (model fields) and puts the distractors back (mocap body_pos)
    # Wrist camera: gripper pose from the simulator's kinematics @ CAD mount (written out here) @ the drawn offset.
    w, x, y, z = WRIST_CAM_QUAT_WXYZ_IN_GRIPPER
    R = np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )
    T_mount = np.eye(4)
    T_mount[:3, :3], T_mount[:3, 3] = R, WRIST_CAM_POS_IN_GRIPPER_M
    expected = sim.T_world_body("gripper") @ T_mount @ np.asarray(rig.wrist_mount_offset_T)
    np.testing.assert_allclose(sim.T_world_cam("wrist"), expected, atol=1e-9)
    K = sim.intrinsics("wrist", 256, 256)
    assert K[1, 1] == pytest.approx(128.0 / math.tan(math.radians(rig.wrist_fovy_deg) / 2.0), rel=1e-9)
    # The cube shows its drawn hue in the scene image (segmentation finds its pixels).
    seg = sim.render("scene", 256, 256, segmentation=True)
    rgb = sim.render("scene", 256, 256)
    cube_geom = sim.model.geom("cube_0_geom").id
    mask = (seg[..., 0] == cube_geom) & (seg[..., 1] == 5)  # 5: mjOBJ_GEOM
    assert mask.sum() > 20
    h_seen = colorsys.rgb_to_hsv(*(rgb[mask].mean(axis=0) / 255.0))[0]
    h_drawn = colorsys.rgb_to_hsv(*rig.cube_rgba[:3])[0]
    assert min(abs(h_seen - h_drawn), 1 - abs(h_seen - h_drawn)) * 360.0 < 15.0
    # Both distractors are in view.
    ids = {sim.model.geom(f"distractor_{i}_geom").id for i in range(2)}
    assert ids <= set(np.unique(seg[..., 0][seg[..., 1] == 5]))
    # Back to the training scene: no distractor in view, the wrist camera at its CAD mount.
    apply_rig(sim, nominal_rig(sim))
    sim.reset(seed=3)
    seg = sim.render("scene", 256, 256, segmentation=True)
    assert not ids & set(np.unique(seg[..., 0][seg[..., 1] == 5]))
    np.testing.assert_allclose(sim.T_world_cam("wrist"), sim.T_world_body("gripper") @ T_mount, atol=1e-9)


def test_distractors_stay_out_of_the_physics(sim):
    """A distractor placed right on the cube changes nothing the cube does (no collision, no mass)."""
    paths = []
    for with_distractor in (False, True):
        rig = nominal_rig(sim)
        if with_distractor:
            cube = sample_layout(5).cube_xy_m
            rig.distractors = [{"shape": "sphere", "xy_m": list(cube), "radius_m": 0.03, "half_height_m": 0.03,
                                "rgba": [0.2, 0.2, 0.9, 1.0]}]  # fmt: skip
        apply_rig(sim, rig)
        sim.reset(seed=5)
        sim.set_cube_pose(0, [*sample_layout(5).cube_xy_m, 0.06])  # dropped from 4 cm: it falls through the sphere
        track = []
        for _ in range(100):
            sim.step(0.01)
            track.append(sim.cube_pose(0)[:3, 3].copy())
        paths.append(np.array(track))
    np.testing.assert_array_equal(paths[0], paths[1])
    apply_rig(sim, nominal_rig(sim))


def test_more_distractors_than_slots_is_refused(sim):
    rig = RigRandomisation(n_distractors=(3, 3)).sample(0)
    with pytest.raises(ValueError, match="slots"):
        apply_rig(sim, rig)


def test_demos_record_the_true_wrist_camera_and_the_draw(tmp_path):
    from para_core.data.dataset import Episode
    from para_ros.commands.sim import main

    out = tmp_path / "demos"
    rc = main(["demos", "--out", str(out), "--episodes", "1", "--seed", "11", "--randomise-rig", "--image-size", "64",
               "--rig-range", "wrist_mount_xyz_m=0.01", "--no-progress"])  # fmt: skip
    assert rc == 0
    ep = Episode.load(out / "episode_000011")
    meta = ep.meta
    drawn = RigRandomisation(wrist_mount_xyz_m=0.01).sample(11)
    assert meta["rig"]["cube_rgba"] == drawn.cube_rgba
    assert meta["rig"]["randomisation"]["wrist_mount_xyz_m"] == 0.01
    # Every frame's wrist pose = the recorded tool pose's gripper @ the moved mount: compare against the nominal rig
    # run of the same layout, whose wrist pose differs by exactly the drawn offset.
    out2 = tmp_path / "nominal"
    assert main(["demos", "--out", str(out2), "--episodes", "1", "--seed", "11", "--image-size", "64",
                 "--no-progress"]) == 0  # fmt: skip
    nominal = Episode.load(out2 / "episode_000011")
    T_true = np.asarray(ep.T_world_cam["wrist"])[0]
    T_nominal = np.asarray(nominal.T_world_cam["wrist"])[0]
    np.testing.assert_allclose(np.linalg.inv(T_nominal) @ T_true, drawn.wrist_mount_offset_T, atol=1e-6)


def test_kept_colours_stay_the_scenes_and_leave_every_other_draw_alone(sim):
    """--rig-keep-colours cube pad: the cube and the pad render in the scene's configured colours, and the rest of
    the rig (mount, lamps, table, distractors) is exactly the draw of the same seed with all colours drawn."""
    full = RigRandomisation(n_distractors=(1, 1)).sample(7)
    kept = RigRandomisation(n_distractors=(1, 1), keep_colours=("pad", "cube")).sample(7)
    assert kept.cube_rgba is None and kept.pad_rgba is None and kept.table_rgba == full.table_rgba
    np.testing.assert_array_equal(kept.wrist_mount_offset_T, full.wrist_mount_offset_T)
    assert (kept.lamps, kept.distractors, kept.ambient) == (full.lamps, full.distractors, full.ambient)
    apply_rig(sim, kept)
    m = sim.model
    np.testing.assert_allclose(m.geom_rgba[m.geom("cube_0_geom").id], sim.config.cube_rgba)
    np.testing.assert_allclose(m.geom_rgba[m.geom("target_pad_geom").id], sim.config.target_rgba)
    np.testing.assert_allclose(m.geom_rgba[m.geom("table").id], full.table_rgba)
    apply_rig(sim, nominal_rig(sim))
    args = _parse(["--randomise-rig", "--rig-keep-colours", "cube", "pad"])
    assert rig_from_args(args).keep_colours == ("cube", "pad")
    with pytest.raises(ValueError, match="needs --randomise-rig"):
        rig_from_args(_parse(["--rig-keep-colours", "cube"]))
    with pytest.raises(ValueError, match="not among"):
        RigRandomisation(keep_colours=("lamp",))
