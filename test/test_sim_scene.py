"""The simulated YAM rig (ROS-free): camera model vs. MuJoCo's own rendering, servos, objects, frames.

The camera check is independent of the sim's camera math: the grasp site is projected with ``cv2.projectPoints``
from the sim's K and ``T_world_cam``, and compared with where MuJoCo's renderer draws a tiny sphere placed at the
site (rendered alone, so nothing occludes it; the centroid of its pixels in the pixel-centre convention).
"""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from para_ros.sim.cameras import intrinsics_from_fovy, look_at_T_world_cam
from para_ros.sim.yam_scene import COMMAND_JOINT_NAMES, MARKER_GROUP, SimConfig, YamSim

# Arm poses (joint1..joint6 rad, gripper 0..1) from IK of top-down grasps at tabletop targets, plus two tilted ones.
POSES = [
    (0.0, 1.7, 1.55, -1.4, 0.0, 0.0, 1.0),  # home, above (0.31, 0, 0.14)
    (0.0, 1.68, 1.354, -1.244, 0.0, 0.0, 0.0),  # (0.30, 0.00, 0.10), closed
    (0.359, 2.2, 1.91, -1.28, 0.0, 0.359, 0.5),  # (0.40, 0.15, 0.06)
    (-0.54, 1.644, 1.394, -1.321, 0.0, -0.54, 0.0),  # (0.25, -0.15, 0.12), closed
    (0.2, 1.2, 1.0, -0.35, 0.3, 0.8, 1.0),  # tilted, gripper looking forward
]
SIZES = [(256, 256), (320, 240)]


@pytest.fixture(scope="module")
def sim():
    s = YamSim(SimConfig(n_cubes=3))
    yield s
    s.close()


def project_cv2(p_world: np.ndarray, K: np.ndarray, T_world_cam: np.ndarray) -> np.ndarray:
    T_cam_world = np.linalg.inv(T_world_cam)
    rvec, _ = cv2.Rodrigues(T_cam_world[:3, :3])
    uv, _ = cv2.projectPoints(p_world.reshape(1, 1, 3), rvec, T_cam_world[:3, 3], K, None)
    return uv.reshape(2)


def marker_centroid(sim: YamSim, camera: str, width: int, height: int) -> tuple[np.ndarray, int]:
    """Centroid (u, v) of the grasp marker's pixels as MuJoCo renders it, and the pixel count."""
    seg = sim.render(camera, width, height, geom_groups=(MARKER_GROUP,), segmentation=True)  # (H, W, 2)
    marker_id = sim.model.geom("grasp_marker").id
    mask = (seg[:, :, 0] == marker_id) & (seg[:, :, 1] == int(mjgeom_type()))
    rows, cols = np.nonzero(mask)
    if len(rows) == 0:
        return np.full(2, np.nan), 0
    return np.array([cols.mean() + 0.5, rows.mean() + 0.5]), len(rows)


def mjgeom_type():
    import mujoco

    return mujoco.mjtObj.mjOBJ_GEOM


@pytest.mark.parametrize("camera", ["scene", "wrist"])
def test_grasp_site_projects_onto_rendered_marker(sim, camera):
    """K and T_world_cam put the grasp site where MuJoCo draws it, within 2 px, at several poses and sizes."""
    checked = 0
    for q7 in POSES:
        sim.reset(q7=q7)
        p_world = sim.site_pose("grasp_site")[:3, 3]
        for width, height in SIZES:
            K = sim.intrinsics(camera, width, height)
            uv = project_cv2(p_world, K, sim.T_world_cam(camera))
            centroid, n_pixels = marker_centroid(sim, camera, width, height)
            inside = 3 <= uv[0] <= width - 3 and 3 <= uv[1] <= height - 3
            if not inside:
                assert n_pixels == 0 or camera == "wrist", f"{camera} {q7}: projects outside but marker rendered"
                continue
            assert n_pixels >= 2, f"{camera} {q7} {width}x{height}: marker not rendered at projected {uv}"
            err = np.linalg.norm(uv - centroid)
            assert err < 2.0, f"{camera} {q7} {width}x{height}: projected {uv}, rendered {centroid}, {err:.2f} px"
            checked += 1
    assert checked >= 2 * len(POSES) - 2, f"only {checked} pose/size pairs had the site in view of {camera}"


@pytest.mark.parametrize("camera", ["scene", "wrist"])
def test_grasp_site_lands_on_gripper_pixels(sim, camera):
    """With the gripper closed, the projected grasp site is on (within 2 px of) pixels of the gripper's bodies."""
    import mujoco

    gripper_bodies = {sim.model.body(n).id for n in ("gripper", "tip_left", "tip_right")}
    for q7 in (POSES[1], POSES[3]):
        sim.reset(q7=q7)
        width, height = 256, 256
        uv = project_cv2(sim.site_pose()[:3, 3], sim.intrinsics(camera, width, height), sim.T_world_cam(camera))
        seg = sim.render(camera, width, height, segmentation=True)  # (H, W, 2)
        is_geom = seg[:, :, 1] == int(mujoco.mjtObj.mjOBJ_GEOM)
        body_of = np.where(is_geom, sim.model.geom_bodyid[np.clip(seg[:, :, 0], 0, sim.model.ngeom - 1)], -1)
        mask = np.isin(body_of, list(gripper_bodies))
        rows, cols = np.nonzero(mask)
        assert len(rows), f"{camera}: gripper not visible at {q7}"
        dist = np.hypot(cols + 0.5 - uv[0], rows + 0.5 - uv[1]).min()
        assert dist <= 2.0, f"{camera} {q7}: nearest gripper pixel {dist:.1f} px from projected site {uv}"


def test_intrinsics_match_fovy_by_hand():
    K = intrinsics_from_fovy(90.0, 320, 240)
    assert K[0, 0] == pytest.approx(120.0) and K[1, 1] == pytest.approx(120.0)  # (240/2) / tan(45 deg)
    assert K[0, 2] == 160.0 and K[1, 2] == 120.0
    with pytest.raises(ValueError, match="fovy_deg"):
        intrinsics_from_fovy(0.0, 10, 10)


def test_look_at_points_optical_axis_at_target():
    T = look_at_T_world_cam((0.1, -0.3, 1.0), (0.33, 0.0, 0.0), up_hint=(1.0, 0.0, 0.0))
    R = T[:3, :3]
    assert np.allclose(R.T @ R, np.eye(3), atol=1e-12) and np.linalg.det(R) == pytest.approx(1.0)
    d = np.array([0.23, 0.3, -1.0])
    assert np.allclose(R[:, 2], d / np.linalg.norm(d))
    assert R[:, 1] @ np.array([1.0, 0.0, 0.0]) < 0  # image up (-y) leans toward +X
    T_down = look_at_T_world_cam((0.3, 0.0, 1.0), (0.3, 0.0, 0.0))  # straight down: falls back to +X up
    assert np.allclose(T_down[:3, 2], [0, 0, -1]) and np.allclose(T_down[:3, 1], [-1, 0, 0])
    with pytest.raises(ValueError, match="must differ"):
        look_at_T_world_cam((0, 0, 1), (0, 0, 1))


def test_scene_camera_pose_from_config_and_moved(sim):
    T_expected = SimConfig().scene_cam_T_world_cam()
    sim.reset()
    assert np.allclose(sim.T_world_cam("scene"), T_expected, atol=1e-9)
    T_new = look_at_T_world_cam((0.6, 0.2, 0.8), (0.3, 0.0, 0.05))
    sim.set_scene_camera_pose(T_new)
    try:
        assert np.allclose(sim.T_world_cam("scene"), T_new, atol=1e-9)
        # and the renderer follows: the marker projects where it is drawn from the new viewpoint too
        uv = project_cv2(sim.site_pose()[:3, 3], sim.intrinsics("scene", 256, 256), T_new)
        centroid, n = marker_centroid(sim, "scene", 256, 256)
        assert n >= 3 and np.linalg.norm(uv - centroid) < 2.0
    finally:
        sim.set_scene_camera_pose(T_expected)


def test_wrist_camera_at_d405_mount(sim):
    """The wrist optical frame sits at the SDK station model's flange -> D405 transform (by hand: Rx(-25 deg))."""
    sim.reset(q7=POSES[2])
    T_g_c = np.linalg.inv(sim.T_world_body("gripper")) @ sim.T_world_cam("wrist")
    assert np.allclose(T_g_c[:3, 3], [0.0, -0.0704, 0.0770], atol=5e-4)
    a = math.radians(-25.0)
    Rx = np.array([[1, 0, 0], [0, math.cos(a), -math.sin(a)], [0, math.sin(a), math.cos(a)]])
    assert np.allclose(T_g_c[:3, :3], Rx, atol=2e-3)


def test_servos_track_targets_and_gripper_maps_to_slide(sim):
    sim.reset()
    target = np.array(POSES[2])
    sim.set_joint_targets(target)
    sim.step(2.0)
    assert np.allclose(sim.joint_positions(), target, atol=0.02), sim.joint_positions()
    slide = sim.data.qpos[sim.model.jnt_qposadr[sim.model.joint("joint7").id]]
    assert slide == pytest.approx(0.5 * 0.0475, abs=1.5e-3)  # gripper 0.5 -> middle of joint7's 0..0.0475 m
    clipped = sim.set_joint_targets([9.0, 0, 0, 0, 0, 0, 2.0])
    assert clipped[0] == pytest.approx(3.14159) and clipped[6] == 1.0
    with pytest.raises(ValueError, match="7 finite"):
        sim.set_joint_targets([0.0] * 6)
    assert COMMAND_JOINT_NAMES == ("joint1", "joint2", "joint3", "joint4", "joint5", "joint6", "gripper")


def test_reset_objects_is_seeded_and_on_table(sim):
    a = sim.reset_objects(seed=3)
    b = sim.reset_objects(seed=3)
    c = sim.reset_objects(seed=4)
    assert np.array_equal(a, b) and not np.allclose(a, c)
    sim.step(0.5)
    pos = sim.object_positions()
    h = sim.config.cube_half_size_m
    assert np.allclose(pos[:, 2], h, atol=2e-3), pos  # resting on the table top z = 0
    (x_lo, x_hi), (y_lo, y_hi) = sim.config.object_region_m
    assert np.all((pos[:, 0] > x_lo - 0.01) & (pos[:, 0] < x_hi + 0.01))
    assert np.all((pos[:, 1] > y_lo - 0.01) & (pos[:, 1] < y_hi + 0.01))


def test_link_transforms_compose_to_world_poses(sim):
    sim.reset(q7=POSES[4])
    T = {"base": np.eye(4)}
    for parent, child, T_pc in sim.link_transforms():
        T[child] = T[parent] @ T_pc
    assert np.allclose(T["gripper"], sim.T_world_body("gripper"), atol=1e-9)
    assert np.allclose(T["grasp_site"], sim.site_pose("grasp_site"), atol=1e-9)
    assert np.allclose(T["wrist_cam_optical"], sim.T_world_cam("wrist"), atol=1e-9)


def test_render_is_rgb_uint8_and_config_errors():
    s = YamSim(SimConfig(n_cubes=1))
    img = s.render("scene", 64, 48)
    assert img.shape == (48, 64, 3) and img.dtype == np.uint8 and img.std() > 1.0
    with pytest.raises(KeyError, match="no camera named 'top'"):
        s.render("top")
    s.close()
    with pytest.raises(ValueError, match="scene_cam_fovy_deg"):
        SimConfig(scene_cam_fovy_deg=0.0)
    with pytest.raises(ValueError, match="home_q7"):
        SimConfig(home_q7=(0.0,) * 6)
