"""The real-rig chain in the simulator: camera poses the graph is not told, ``para-calib capture`` + ``solve``
recover them.

The simulator renders the scene camera 5 cm and 5 degrees away from its configured pose (and publishes no transform
for it: ``scene_cam_tf: none``) and the wrist camera 3 mm and 2 degrees away from ``config/yam.yaml``'s mount (TF
says the CAD mount). Capture drives the simulated arm over DDS (sim_node in its own process), solve reads the
recording; the truth the result is compared with is composed here from the offsets (not read from the sim).
Requirements: scene camera within 2 mm / 0.2 deg, wrist mount within 1 mm / 0.2 deg. Small images (320x240), 8
candidate poses per camera.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from para_core.calibration.calibration_file import load_calibration
from para_ros.calibration.solve import pose_error
from para_ros.commands import calib
from para_ros.robot.yam import load_yam_config
from para_ros.sim.calibration_board import offset_T
from para_ros.sim.yam_scene import SimConfig

SCENE_OFFSET_XYZ_M, SCENE_OFFSET_RPY_DEG = (0.04, -0.03, 0.0), (3.0, -4.0, 0.0)
WRIST_OFFSET_XYZ_M, WRIST_OFFSET_RPY_DEG = (0.002, -0.002, 0.001), (1.2, -1.6, 0.0)
SMALL = ["--sim-param", "image_width:=320", "--sim-param", "image_height:=240", "--sim-param", "n_cubes:=0"]


def _vec(v) -> str:
    return "[" + ",".join(repr(float(x)) for x in v) + "]"


def test_offsets_are_the_size_the_requirement_names():
    for xyz, rpy, mm, deg in (
        (SCENE_OFFSET_XYZ_M, SCENE_OFFSET_RPY_DEG, 50.0, 5.0),
        (WRIST_OFFSET_XYZ_M, WRIST_OFFSET_RPY_DEG, 3.0, 2.0),
    ):
        T = offset_T(xyz, rpy)
        assert 1000 * np.linalg.norm(T[:3, 3]) == pytest.approx(mm, abs=0.01)
        assert math.degrees(math.acos((np.trace(T[:3, :3]) - 1) / 2)) == pytest.approx(deg, abs=0.05)


def _capture_and_solve(tmp_path, camera: str, board: str, sim_params: list[str]):
    bag = tmp_path / f"{camera}_bag"
    out = tmp_path / "calibration.yaml"
    params = [p for rule in sim_params for p in ("--sim-param", rule)]
    assert (
        calib.main(
            [
                "capture",
                "--out",
                str(bag),
                "--camera",
                camera,
                "--start-sim",
                "--poses",
                "8",
                "--sim-param",
                f"calibration_board:={board}",
                *SMALL,
                *params,
            ]
        )
        == 0
    )
    args = ["solve", str(bag), "--camera", camera, "--out", str(out)] + (["--merge"] if out.exists() else [])
    assert calib.main(args) == 0
    return bag, out


@pytest.mark.slow
def test_capture_and_solve_recover_the_withheld_camera_poses(tmp_path):
    from para_ros.bag.reader import BagReader, BagTopicConfig

    scene_bag, out = _capture_and_solve(
        tmp_path,
        "scene_cam",
        "flange",
        [
            f"scene_cam_true_offset_xyz_m:={_vec(SCENE_OFFSET_XYZ_M)}",
            f"scene_cam_true_offset_rpy_deg:={_vec(SCENE_OFFSET_RPY_DEG)}",
            "scene_cam_tf:=none",
        ],
    )
    wrist_bag, out = _capture_and_solve(
        tmp_path,
        "wrist_cam",
        "table",
        [
            f"wrist_cam_true_offset_xyz_m:={_vec(WRIST_OFFSET_XYZ_M)}",
            f"wrist_cam_true_offset_rpy_deg:={_vec(WRIST_OFFSET_RPY_DEG)}",
        ],
    )
    cal = load_calibration(out)
    scene_true = SimConfig().scene_cam_T_world_cam() @ offset_T(SCENE_OFFSET_XYZ_M, SCENE_OFFSET_RPY_DEG)
    cad = load_yam_config().wrist_camera.T_parent_camera()
    wrist_true = cad @ offset_T(WRIST_OFFSET_XYZ_M, WRIST_OFFSET_RPY_DEG)
    scene_mm, scene_deg = pose_error(cal.camera("scene_cam").T_parent_child(), scene_true)
    wrist_mm, wrist_deg = pose_error(cal.camera("wrist_cam").T_parent_child(), wrist_true)
    print(
        f"recovered: scene_cam {scene_mm:.3f} mm / {scene_deg:.4f} deg, wrist_cam {wrist_mm:.3f} mm / "
        f"{wrist_deg:.4f} deg"
    )
    assert scene_mm < 2.0 and scene_deg < 0.2
    assert wrist_mm < 1.0 and wrist_deg < 0.2
    assert (tmp_path / "calibration_scene_cam_overlay.png").is_file()
    assert (tmp_path / "calibration_wrist_cam_overlay.png").is_file()

    # What the graph was told: no scene camera transform at all, the CAD wrist mount (not the rendered one).
    with BagReader(scene_bag, BagTopicConfig(ee_frame="gripper"), cameras=False) as bag:
        assert "scene_cam_optical_frame" not in bag.known_frames()
    with BagReader(wrist_bag, BagTopicConfig(ee_frame="gripper"), cameras=False) as bag:
        t = next(s for _, s in bag.messages("/joint_states"))
        T_told = np.linalg.inv(
            bag.lookup("gripper", int(t.header.stamp.sec) * 10**9 + int(t.header.stamp.nanosec))
        ) @ bag.lookup("wrist_cam_optical_frame", int(t.header.stamp.sec) * 10**9 + int(t.header.stamp.nanosec))
    assert np.allclose(T_told, cad, atol=1e-6)
    assert pose_error(T_told, wrist_true)[0] > 2.5


@pytest.mark.slow
def test_manual_capture_takes_a_sample_when_the_arm_is_still(tmp_path):
    """--manual with the arm left alone: one sample (the arm was still), both cameras and the arm's TF recorded."""
    from para_ros.bag.reader import BagReader, BagTopicConfig

    bag = tmp_path / "manual"
    assert (
        calib.main(
            ["capture", "--manual", "--samples", "1", "--still-s", "0.5", "--out", str(bag), "--start-sim", *SMALL]
        )
        == 0
    )
    with BagReader(bag, BagTopicConfig(ee_frame="gripper"), cameras=False) as reader:
        topics = reader.topics
        assert {"/scene_cam/image_raw", "/wrist_cam/image_raw", "/scene_cam/camera_info", "/tf"} <= set(topics)
        assert len(list(reader.messages("/scene_cam/image_raw"))) >= 1
