"""Joint positions of a LeRobot YAM dataset -> the poses PARA trains on, from a calibration file and the YAM's FK.

Datasets recorded with LeRobot's YAM plugins hold joint positions and images, no camera geometry. The calibration
file (``para_calibration: 1``: ``cameras.scene_cam`` is the fixed camera's pose in ``base``, ``cameras.wrist_cam`` the
wrist mount in ``gripper``) plus forward kinematics on the I2RT SDK's model (``para_ros.robot.yam_frames``, the frames
the executor publishes on a real arm) give per frame: the tool pose ``base <- grasp_site`` and each camera's pose
in ``base``. A calibration file without ``wrist_cam`` keeps ``config/yam.yaml``'s mount. Intrinsics are not part of
the calibration format; a camera entry may carry ``K`` (3x3, pixels, at the dataset's image size), else they come
from ``--intrinsics``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from para_core.data.lerobot_dataset import LeRobotDataError

CALIBRATION_FORMAT_KEY = "para_calibration"
VIEW_TO_CALIBRATION_CAMERA = {"scene": "scene_cam", "wrist": "wrist_cam"}


def load_calibration_dict(path: str | Path) -> dict:
    """The calibration file as a dict, checked for ``para_calibration: 1`` and a ``cameras`` mapping."""
    path = Path(path)
    if not path.is_file():
        raise LeRobotDataError(f"calibration file {path} does not exist; write one with the calibration command "
                               "(format: para_calibration: 1)")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict) or data.get(CALIBRATION_FORMAT_KEY) != 1:
        raise LeRobotDataError(f"{path}: not a PARA calibration file (needs '{CALIBRATION_FORMAT_KEY}: 1')")
    if not isinstance(data.get("cameras"), dict) or not data["cameras"]:
        raise LeRobotDataError(f"{path}: no 'cameras' mapping (scene_cam and/or wrist_cam)")
    return data


def _camera_pose(entry: dict, name: str) -> np.ndarray:
    from para_core.model.rotations import make_matrix

    try:
        return make_matrix(np.asarray(entry["xyz_m"], dtype=float), np.asarray(entry["quat_xyzw"], dtype=float))
    except (KeyError, ValueError, TypeError) as exc:
        raise LeRobotDataError(f"calibration camera {name!r}: needs xyz_m (3) and quat_xyzw (4) ({exc})") from None


def intrinsics_from_calibration(calibration: dict) -> dict[str, np.ndarray]:
    """view -> (3, 3) K for the calibration cameras that carry a ``K``."""
    out = {}
    for view, cam in VIEW_TO_CALIBRATION_CAMERA.items():
        entry = calibration["cameras"].get(cam) or {}
        if "K" in entry:
            out[view] = np.asarray(entry["K"], dtype=float).reshape(3, 3)
    return out


def yam_joints_to_poses(calibration: dict, views=("scene", "wrist"), yam_config_path: str | None = None):
    """-> callable (N, 6) arm joints, radians -> (T_base_tool (N, 4, 4), {view: T_base_cam (N, 4, 4)})."""
    from para_ros.robot.yam import WristCameraMount, load_yam_config
    from para_ros.robot.yam_frames import YamFrames

    cfg = load_yam_config(yam_config_path)
    cams = calibration["cameras"]
    mount = cfg.wrist_camera
    if "wrist_cam" in cams:
        entry = cams["wrist_cam"]
        if entry.get("parent_frame", "gripper") != "gripper":
            raise LeRobotDataError(f"calibration wrist_cam.parent_frame={entry.get('parent_frame')!r}; the wrist "
                                   "mount must be given in 'gripper' (the joint6 flange)")
        mount = WristCameraMount(parent_frame="gripper", frame_id=entry.get("frame_id", mount.frame_id),
                                 xyz_m=entry["xyz_m"], quat_xyzw=entry["quat_xyzw"])
    T_base_scene = None
    if "scene_cam" in cams:
        if cams["scene_cam"].get("parent_frame", "base") != "base":
            raise LeRobotDataError("calibration scene_cam.parent_frame must be 'base'")
        T_base_scene = _camera_pose(cams["scene_cam"], "scene_cam")
    if "scene" in views and T_base_scene is None:
        raise LeRobotDataError("the calibration file has no scene_cam (the fixed camera's pose in base); calibrate it "
                               "or leave the scene view out")
    frames = YamFrames(mount, cfg.model.arm_type, cfg.model.gripper_type)

    def convert(q_rad: np.ndarray):
        q_rad = np.asarray(q_rad, dtype=float)  # (N, 6)
        T_tool = np.zeros((q_rad.shape[0], 4, 4))
        T_cam = {v: np.zeros((q_rad.shape[0], 4, 4)) for v in views}
        for i, q in enumerate(q_rad):
            T = np.eye(4)
            for parent, child, T_pc in frames.transforms(q):
                if child == frames.tool_site:
                    T_tool[i] = T_base_gripper @ T_pc
                elif child == mount.frame_id:
                    T_wrist = T_base_gripper @ T_pc
                else:
                    T = T @ T_pc
                    if child == "gripper":
                        T_base_gripper = T.copy()
            if "wrist" in views:
                T_cam["wrist"][i] = T_wrist
            if "scene" in views:
                T_cam["scene"][i] = T_base_scene
        return T_tool, T_cam

    return convert
