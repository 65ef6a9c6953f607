"""Consumers of calibration.yaml: the deploy graph (both launchers), the calibration_tf node over real DDS, the
simulator's told frames and the executor's wrist mount.

The calibration file is written here as YAML text by hand (not by the package's writer), with transforms whose
matrices are composed here independently (Rodrigues), so a consumer that swaps quaternion order, inverts a transform
or ignores the file fails.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from test_deploy_graph import (  # noqa: F401
    describe_command,
    describe_launch_node,
    launch_module,
    launch_nodes,
)

from para_ros.commands import deploy
from para_ros.deploy import graph
from para_ros.ros_io.spin import spin_until

SCENE_T = np.eye(4)
SCENE_T[:3, :3] = cv2.Rodrigues(np.array([-2.2, 0.05, 0.1]))[0]
SCENE_T[:3, 3] = [0.35, -0.47, 0.61]
WRIST_T = np.eye(4)
WRIST_T[:3, :3] = cv2.Rodrigues(np.array([-0.45, 0.02, -0.01]))[0]
WRIST_T[:3, 3] = [0.001, -0.071, 0.078]


def _quat_xyzw(R: np.ndarray) -> list[float]:
    """Quaternion (x, y, z, w) from the axis-angle (independent of para_core's conversion)."""
    rvec = cv2.Rodrigues(R)[0].reshape(3)
    angle = float(np.linalg.norm(rvec))
    axis = rvec / angle
    return [*(axis * np.sin(angle / 2)).tolist(), float(np.cos(angle / 2))]


def _entry(method, parent, frame, T, board_on) -> str:
    return (
        f"    method: {method}\n    parent_frame: {parent}\n    frame_id: {frame}\n"
        f"    xyz_m: {T[:3, 3].tolist()}\n    quat_xyzw: {_quat_xyzw(T[:3, :3])}\n"
        f"    board_on: {board_on}\n    board_xyz_m: [0.1, 0.0, 0.05]\n    board_quat_xyzw: [0.0, 0.0, 0.0, 1.0]\n"
    )


@pytest.fixture()
def calibration_file(tmp_path):
    text = (
        "para_calibration: 1\ndate: '2026-12-03T04:00:00Z'\n"
        "board: {squares_x: 5, squares_y: 7, square_m: 0.03, marker_m: 0.022, dictionary: DICT_5X5_100}\n"
        "cameras:\n  scene_cam:\n"
        + _entry("eye_to_hand", "base", "scene_cam_optical_frame", SCENE_T, "gripper")
        + "  wrist_cam:\n"
        + _entry("eye_in_hand", "gripper", "wrist_cam_optical_frame", WRIST_T, "base")
    )
    path = tmp_path / "calibration.yaml"
    path.write_text(text)
    return path


def _deploy_side(argv):
    args = deploy.build_parser().parse_args(argv)
    executable_of_module = {s.module: s.executable for s in graph.NODES}
    return {
        d["name"]: d
        for d in (
            describe_command(cmd, executable_of_module) for _, cmd in deploy.graph_commands(deploy._settings(args))
        )
    }


@pytest.mark.parametrize("backend", graph.BACKENDS)
def test_both_launchers_pass_the_calibration_the_same_way(launch_module, calibration_file, backend):  # noqa: F811
    launch_side = {
        d["name"]: d
        for d in (
            describe_launch_node(n)
            for n in launch_nodes(launch_module, robot=backend, calibration=str(calibration_file))
        )
    }
    deploy_side = _deploy_side(["--robot", backend, "--calibration", str(calibration_file)])
    assert launch_side == deploy_side
    path = str(calibration_file.resolve())
    assert deploy_side["chunk_executor"]["overrides"]["calibration_file"] == path
    if backend == "sim":
        assert "calibration_tf" not in deploy_side
        assert deploy_side["sim_node"]["overrides"] == {
            "calibration_file": path,
            "scene_cam_tf": "calibration",
            "wrist_cam_tf": "calibration",
        }
    else:
        assert deploy_side["calibration_tf"]["overrides"] == {
            "calibration_file": path,
            "publish_wrist": backend == "topic",
        }
    without = _deploy_side(["--robot", backend])
    assert "calibration_tf" not in without
    assert "calibration_file" not in without["chunk_executor"]["overrides"]


def test_a_bad_calibration_file_is_refused_naming_it(tmp_path):
    with pytest.raises(ValueError, match="calibration="):
        graph.DeploySettings(calibration=str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("para_calibration: 1\ncameras: {}\n")
    with pytest.raises(ValueError, match="calibration="):
        graph.DeploySettings(calibration=str(bad))


def test_sim_told_frames_and_executor_wrist_mount_come_from_the_file(calibration_file):
    from para_ros.calibration.consumers import wrist_mount
    from para_ros.robot.yam import load_yam_config
    from para_ros.sim.told_frames import told_frames
    from para_ros.sim.yam_scene import SimConfig

    told = told_frames(SimConfig(n_cubes=0), "calibration", "calibration", str(calibration_file))
    assert np.allclose(told.T_base_scene_cam, SCENE_T, atol=1e-9)
    assert np.allclose(told.T_gripper_wrist_cam, WRIST_T, atol=1e-9)
    mount = wrist_mount(calibration_file, load_yam_config().wrist_camera)
    assert mount.parent_frame == "gripper" and mount.frame_id == "wrist_cam_optical_frame"
    assert np.allclose(mount.T_parent_camera(), WRIST_T, atol=1e-9)


def test_calibration_tf_node_publishes_the_file_on_tf_static(calibration_file):
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from para_ros.adapters.tf import Buffer, TransformListener
    from para_ros.nodes.calibration_tf import CalibrationTfNode

    rclpy.init()
    try:
        node = CalibrationTfNode(
            parameter_overrides=[
                rclpy.parameter.Parameter("calibration_file", value=str(calibration_file)),
                rclpy.parameter.Parameter("publish_wrist", value=True),
            ]
        )
        listener_node = rclpy.create_node("calibration_tf_test_listener")
        buffer = Buffer()
        TransformListener(buffer, listener_node)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        executor.add_node(listener_node)
        got = {}

        def both_frames_seen() -> bool:
            for parent, child in (("base", "scene_cam_optical_frame"), ("gripper", "wrist_cam_optical_frame")):
                try:
                    got[child] = buffer.lookup_matrix(parent, child, rclpy.time.Time())
                except Exception:  # noqa: BLE001 - not there yet
                    pass
            return len(got) == 2

        spin_until(executor, both_frames_seen, 10.0)
        assert np.allclose(got["scene_cam_optical_frame"], SCENE_T, atol=1e-6)
        assert np.allclose(got["wrist_cam_optical_frame"], WRIST_T, atol=1e-6)
        node.destroy_node()
        listener_node.destroy_node()
    finally:
        rclpy.try_shutdown()


def test_extract_keeps_the_calibration_and_train_records_it(calibration_file, tmp_path):
    import hashlib
    import json

    from bag_fixtures import SyntheticBagSpec, write_synthetic_bag

    from para_core.train.calibration_record import (
        episode_calibrations,
        write_recipe_calibrations,
    )
    from para_ros.commands import bag as bag_tools

    bag = write_synthetic_bag(tmp_path / "bag", SyntheticBagSpec())
    sha = hashlib.sha256(calibration_file.read_bytes()).hexdigest()
    # Bad file: refused, nothing written.
    bad = tmp_path / "bad.yaml"
    bad.write_text("para_calibration: 1\n")
    assert (
        bag_tools.main(["extract", str(bag), "--out", str(tmp_path / "ep_bad"), "--calibration", str(bad), "--quiet"])
        == 2
    )
    assert not (tmp_path / "ep_bad").exists()
    # Given on the command line.
    assert (
        bag_tools.main(
            ["extract", str(bag), "--out", str(tmp_path / "ep1"), "--calibration", str(calibration_file), "--quiet"]
        )
        == 0
    )
    assert (tmp_path / "ep1" / "calibration.yaml").read_bytes() == calibration_file.read_bytes()
    meta = json.loads((tmp_path / "ep1" / "meta.json").read_text())["meta"]["calibration"]
    assert meta["sha256"] == sha and meta["content"]["cameras"]["scene_cam"]["parent_frame"] == "base"
    # Found inside the bag directory; an episode without one records nothing.
    (bag / "calibration.yaml").write_bytes(calibration_file.read_bytes())
    assert bag_tools.main(["extract", str(bag), "--out", str(tmp_path / "ep2"), "--quiet"]) == 0
    (bag / "calibration.yaml").unlink()
    assert bag_tools.main(["extract", str(bag), "--out", str(tmp_path / "ep3"), "--quiet"]) == 0
    assert not (tmp_path / "ep3" / "calibration.yaml").exists()
    records = episode_calibrations([tmp_path / "ep1", tmp_path / "ep2", tmp_path / "ep3"])
    assert len(records) == 1 and records[0]["sha256"] == sha and records[0]["episodes"] == ["ep1", "ep2"]
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "recipe.json").write_text(json.dumps({"preset": "tiny"}))
    write_recipe_calibrations(ckpt, records)
    recipe = json.loads((ckpt / "recipe.json").read_text())
    assert recipe["preset"] == "tiny" and recipe["calibrations"][0]["sha256"] == sha
    assert write_recipe_calibrations(tmp_path, []) is None and not (tmp_path / "recipe.json").exists()
