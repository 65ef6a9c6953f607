"""Run-time OOD conditions and the calibration marker on the simulated rig (ROS-free, YamSim renders).

References: OpenCV projections of known world points (the grasp-site marker, the ArUco corners) through the poses the
simulator renders with, and the unmodified training scene.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from para_core.calibration.live_monitor import ERROR, OK, UNKNOWN, WARN, CalibrationMonitor, MonitorConfig, check_marker
from para_core.calibration.marker import ArucoMarkerSpec, detect_marker
from para_ros.sim.calibration_marker import MARKER_BODY, MarkerMount
from para_ros.sim.disturbances import (
    OCCLUDER_BODY,
    CameraFault,
    CameraKnock,
    DisturbanceConfig,
    Disturbances,
    HandOccluder,
)
from para_ros.sim.told_frames import told_frames
from para_ros.sim.yam_scene import MARKER_GROUP, SimConfig, YamSim

W = H = 256
SPEC = ArucoMarkerSpec(side_m=0.05)


def _cv_K(sim) -> np.ndarray:
    """The scene camera's K in OpenCV's pixel-centre convention (cx, cy half a pixel lower than the sim's)."""
    K = sim.intrinsics("scene", W, H).copy()
    K[0, 2] -= 0.5
    K[1, 2] -= 0.5
    return K


def _project(p_world: np.ndarray, K: np.ndarray, T_world_cam: np.ndarray) -> np.ndarray:
    T = np.linalg.inv(T_world_cam)
    uv, _ = cv2.projectPoints(p_world.reshape(-1, 1, 3), cv2.Rodrigues(T[:3, :3])[0], T[:3, 3].copy(), K, None)
    return uv.reshape(-1, 2)


def _grasp_marker_centroid(sim) -> np.ndarray:
    """(u, v) of the rendered grasp-site sphere, OpenCV pixel-centre convention."""
    import mujoco

    seg = sim.render("scene", W, H, geom_groups=(MARKER_GROUP,), segmentation=True)
    mask = (seg[:, :, 0] == sim.model.geom("grasp_marker").id) & (seg[:, :, 1] == int(mujoco.mjtObj.mjOBJ_GEOM))
    rows, cols = np.nonzero(mask)
    assert len(rows) >= 2
    return np.array([cols.mean(), rows.mean()])


@pytest.fixture(scope="module")
def occluder_sim():
    occluder = HandOccluder(at_s=0.2)
    s = YamSim(SimConfig(scene_extras=(occluder,)))
    yield s, occluder
    s.close()


def test_knocked_camera_renders_moved_while_the_told_pose_stays():
    config = SimConfig()
    sim = YamSim(config)
    try:
        told = told_frames(config).T_base_scene_cam
        knock = CameraKnock(at_s=0.1, xyz_m=(0.01, 0.0, 0.0), rpy_deg=(0.0, 1.0, 0.0))
        dist = Disturbances(DisturbanceConfig(knock=knock), config.scene_cam_true_T_world_cam())
        dist.reset(sim)
        K = _cv_K(sim)
        p = sim.site_pose("grasp_site")[:3, 3]
        before = _grasp_marker_centroid(sim)
        assert np.linalg.norm(before - _project(p, K, told)[0]) < 1.5
        sim.step(0.12)
        dist.update(sim)
        p = sim.site_pose("grasp_site")[:3, 3]
        after = _grasp_marker_centroid(sim)
        T_knocked = told @ knock.offset_T()
        assert np.allclose(sim.T_world_cam("scene"), T_knocked, atol=1e-6)
        assert np.linalg.norm(after - _project(p, K, T_knocked)[0]) < 1.5  # rendered at the knocked pose
        assert np.linalg.norm(after - _project(p, K, told)[0]) > 4.0  # ... away from where the told pose puts it
        assert np.allclose(told_frames(config).T_base_scene_cam, told)  # what TF publishes did not move
        sim.reset()
        dist.reset(sim)  # a new episode: the camera back where it was until the knock
        assert np.allclose(sim.T_world_cam("scene"), told, atol=1e-6)
    finally:
        sim.close()


def test_frozen_and_covered_cameras():
    sim = YamSim(SimConfig())
    try:
        frozen = Disturbances(DisturbanceConfig(camera_fault=CameraFault("frozen", "scene", 0.2)), np.eye(4))
        covered = Disturbances(DisturbanceConfig(camera_fault=CameraFault("covered", "both", 0.2)), np.eye(4))
        q = sim.joint_targets()
        images = []
        for k in range(6):  # the arm moves: every render differs
            q[0] = 0.15 * k
            sim.set_joint_targets(q)
            sim.step(0.1)
            render = sim.render("scene", W, H)
            images.append((sim.time_s, render, frozen.filter_image("scene", render, sim.time_s)))
            assert frozen.filter_image("wrist", render, sim.time_s) is render  # the other camera is untouched
            c = covered.filter_image("wrist", render, sim.time_s)
            assert (not c.any()) == (sim.time_s >= 0.2 - 1e-9)
        renders = [r for _, r, _ in images]
        assert all(not np.array_equal(a, b) for a, b in zip(renders, renders[1:]))
        last_before = max(i for i, (t, _, _) in enumerate(images) if t < 0.2 - 1e-9)
        for t, render, out in images:
            if t < 0.2 - 1e-9:
                assert np.array_equal(out, render)
            else:  # later stamps, the same image: the last one before the fault
                assert np.array_equal(out, images[last_before][1])
    finally:
        sim.close()


def test_occluder_appears_over_the_workspace_only_when_due(occluder_sim):
    sim, occluder = occluder_sim
    plain = YamSim(SimConfig())
    try:
        assert plain.model.nbody == sim.model.nbody - 1  # the default model holds no occluder
        with pytest.raises(KeyError):
            plain.model.body(OCCLUDER_BODY)
        dist = Disturbances(DisturbanceConfig(occluder=occluder), SimConfig().scene_cam_true_T_world_cam())
        dist.reset(sim)
        assert np.array_equal(sim.render("scene", W, H), plain.render("scene", W, H))  # parked: out of view
        sim.step(0.25)
        dist.update(sim)
        seg = sim.render("scene", W, H, segmentation=True)
        hand = seg[:, :, 0] == sim.model.geom("ood_hand_occluder_geom").id
        assert hand.sum() > 300  # a hand-sized blob in a 256 x 256 view
        centre = _project(np.asarray(occluder.centre_m), _cv_K(sim), sim.T_world_cam("scene"))[0]
        rows, cols = np.nonzero(hand)
        assert np.linalg.norm([cols.mean() - centre[0], rows.mean() - centre[1]]) < 6.0
    finally:
        plain.close()


def test_disturbance_configs_refuse_bad_values():
    with pytest.raises(ValueError, match="CameraKnock.at_s"):
        CameraKnock(at_s=-1.0)
    with pytest.raises(ValueError, match="at most 0.5 m"):
        CameraKnock(at_s=1.0, xyz_m=(1.0, 0.0, 0.0))
    with pytest.raises(ValueError, match="CameraFault.kind"):
        CameraFault("blurred")
    with pytest.raises(ValueError, match="HandOccluder.radius_m"):
        HandOccluder(at_s=0.0, radius_m=0.0)
    with pytest.raises(ValueError, match="DisturbanceConfig.knock"):
        DisturbanceConfig(knock="yes")


def test_rendered_marker_is_detected_where_its_corners_project():
    """Detected corners against cv2.projectPoints of the marker's true corners, over several arm poses: within 0.5 px
    and without the inward bias of a saddle-point refinement (OpenCV's cornerSubPix: 0.36 px inwards here)."""
    sim = YamSim(SimConfig(scene_extras=(MarkerMount(SPEC),)))
    try:
        radial, seen = [], 0
        for yaw in (-0.4, -0.2, 0.0, 0.2, 0.4):
            q = np.array([0.1 * yaw, 1.7, 1.55, -1.4, 0.0, yaw, 1.0])
            sim.reset(q)
            corners = detect_marker(sim.render("scene", W, H), SPEC)
            if corners is None:
                continue
            seen += 1
            world = (sim.T_world_body(MARKER_BODY) @ np.c_[SPEC.corners_marker_m(), np.ones(4)].T).T[:, :3]
            truth = _project(world, _cv_K(sim), sim.T_world_cam("scene"))  # (4, 2)
            err = np.linalg.norm(corners - truth, axis=1)
            assert err.max() < 0.5, err
            outward = (truth - truth.mean(axis=0)) / np.linalg.norm(truth - truth.mean(axis=0), axis=1, keepdims=True)
            radial.extend(np.sum((corners - truth) * outward, axis=1))
        assert seen >= 4
        assert abs(np.mean(radial)) < 0.2, np.mean(radial)
    finally:
        sim.close()


def test_knocked_camera_is_flagged_within_5_s_by_the_monitor():
    """The arm sweeps joint1 while the scene camera is knocked by 1 cm and 1 deg at 6 s: OK before, flagged (WARN
    or worse) within 5 s after, and UNKNOWN while the marker is covered."""
    config = SimConfig(scene_extras=(MarkerMount(SPEC),))
    sim = YamSim(config)
    try:
        told = told_frames(config).T_base_scene_cam
        knock = CameraKnock(at_s=6.0, xyz_m=(0.01, 0.0, 0.0), rpy_deg=(0.0, 1.0, 0.0))
        dist = Disturbances(DisturbanceConfig(knock=knock), config.scene_cam_true_T_world_cam())
        dist.reset(sim)
        T_flange_marker = sim.T_parent_child("gripper", MARKER_BODY)
        monitor = CalibrationMonitor(MonitorConfig())
        K, q0 = _cv_K(sim), sim.joint_targets()
        levels, errors_before = [], []
        while sim.time_s < 11.0 - 1e-9:
            q = q0.copy()
            q[0] = 0.25 * np.sin(0.6 * sim.time_s)
            q[5] = 0.3 * np.sin(0.4 * sim.time_s)
            sim.set_joint_targets(q)
            sim.step(0.1)
            dist.update(sim)
            corners = detect_marker(sim.render("scene", W, H), SPEC)
            t = sim.time_s
            if corners is None:
                monitor.add_unseen(t)
            else:
                check = check_marker(corners, sim.T_world_body("gripper"), T_flange_marker, told, K, SPEC, stamp_s=t)
                monitor.add_check(check)
                if t < 6.0 - 1e-6:  # the knock counts from 6 s minus MuJoCo's rounding of time
                    errors_before.append(check.error_px)
            levels.append((t, monitor.status().level))
        assert monitor.n_seen >= 0.9 * monitor.n_images
        assert all(level == OK for t, level in levels if 2.0 <= t < 6.0 - 1e-9), levels
        flagged = [t for t, level in levels if t >= 6.0 - 1e-9 and level in (WARN, ERROR)]
        assert flagged and flagged[0] - 6.0 < 5.0
        assert max(errors_before) < 1.5, errors_before
        print(
            f"before the knock: median {np.median(errors_before):.2f} px, max {max(errors_before):.2f} px; "
            f"flagged {flagged[0] - 6.0:.1f} s after, status after: {monitor.status().message}"
        )
        for k in range(30):  # the marker covered: no verdict
            monitor.add_unseen(11.0 + 0.1 * k)
        assert monitor.status().level == UNKNOWN
    finally:
        sim.close()


def test_sim_node_parameters_reach_the_conditions_and_default_to_none():
    """The `--node-param sim_node:NAME:=VALUE` route of para-sim eval: the rules, checked by the sim node's table, make
    the configured conditions; the table's defaults make none (and no marker), so the default model is unchanged."""
    from para_ros.deploy.graph import parse_node_params
    from para_ros.nodes.parameter_registry import check_node_params, tables
    from para_ros.nodes.sim_disturbance_params import disturbance_config_from_params, marker_mount_from_params

    defaults = tables()["sim_node"][0].defaults()
    none = disturbance_config_from_params(defaults)
    assert not none.any and none.scene_extras() == () and marker_mount_from_params(defaults) is None
    rules = [
        "sim_node:ood_knock_at_s:=5",
        "sim_node:ood_knock_xyz_m:=[0.01, 0, 0]",
        "sim_node:ood_knock_rpy_deg:=[0, 1, 0]",
        "sim_node:ood_camera_fault:=frozen",
        "sim_node:ood_camera_fault_camera:=wrist",
        "sim_node:ood_camera_fault_at_s:=3.5",
        "sim_node:ood_occluder_at_s:=2",
        "sim_node:calibration_marker:=flange",
    ]
    p = {**defaults, **check_node_params(parse_node_params(rules))["sim_node"]}
    config = disturbance_config_from_params(p)
    assert config.knock == CameraKnock(5.0, (0.01, 0.0, 0.0), (0.0, 1.0, 0.0))
    assert config.camera_fault == CameraFault("frozen", "wrist", 3.5)
    assert config.occluder.at_s == 2.0 and config.occluder.centre_m == (0.33, 0.0, 0.14)
    assert marker_mount_from_params(p) is not None
    with pytest.raises(ValueError, match="ood_camera_fault"):
        check_node_params(parse_node_params(["sim_node:ood_camera_fault:=smudged"]))


def test_demos_with_the_calibration_marker_show_it_in_the_scene_images(tmp_path):
    """``para-sim demos --calibration-marker``: the training images carry the marker the monitor needs (a policy
    deployed with the monitor must have seen it), and the episode's meta says so."""
    from para_core.data.dataset import Episode
    from para_ros.commands import sim as sim_command

    assert (
        sim_command.main(
            ["demos", "--out", str(tmp_path), "--episodes", "1", "--seed", "5", "--calibration-marker", "--no-progress"]
        )
        == 0
    )
    episode = Episode.load(next(tmp_path.glob("episode_*")))
    assert episode.meta["calibration_marker"] == "flange"
    assert detect_marker(episode.images["scene"][0], SPEC) is not None
