"""What the simulated rig TELLS the graph about its cameras, as opposed to where it renders them.

On a real rig nobody knows the cameras' true poses: the scene camera's transform comes from a calibration (or nowhere)
and the wrist mount from CAD or a calibration. The simulator can play that: it renders the cameras at their true poses
(the configured ones moved by ``*_true_offset_*``, :class:`para_ros.sim.yam_scene.SimConfig`) and publishes, per
camera, one of:

* ``nominal``: the configured pose (scene: ``scene_cam_position_m`` + look-at or ``scene_cam_T_world_cam``; wrist:
  ``config/yam.yaml``'s ``wrist_camera``), i.e. what a user would believe without calibrating;
* ``truth``: the pose it renders;
* ``calibration``: the camera's entry of a ``calibration.yaml`` (:mod:`para_core.calibration.calibration_file`);
* ``none`` (scene camera only): no transform at all (a rig whose scene camera was never calibrated).

With zero offsets nominal and truth are the same pose.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SCENE_CAM_TF_CHOICES = ("nominal", "truth", "none", "calibration")
WRIST_CAM_TF_CHOICES = ("nominal", "truth", "calibration")


@dataclass
class ToldFrames:
    """The camera transforms the sim publishes: ``T_base_scene_cam`` (None = not published) and
    ``T_gripper_wrist_cam`` (always published, under body ``gripper``)."""

    T_base_scene_cam: np.ndarray | None
    T_gripper_wrist_cam: np.ndarray


def _calibration_camera_T(calibration_file: str, camera: str, parent: str) -> np.ndarray:
    if not calibration_file:
        raise ValueError(
            f"{camera}_tf=calibration needs calibration_file: give the path of a calibration.yaml "
            "(para-calib solve writes one)"
        )
    from para_core.calibration.calibration_file import (
        load_calibration,  # OpenCV (the file's board): loaded only when a calibration file is given
    )

    cal = load_calibration(calibration_file)
    if camera not in cal.cameras:
        raise ValueError(
            f"calibration_file={calibration_file!r} has no cameras.{camera}: calibrate it "
            f"(para-calib solve --camera {camera}) or choose another {camera}_tf"
        )
    entry = cal.camera(camera)
    if entry.parent_frame != parent:
        raise ValueError(
            f"calibration_file={calibration_file!r}: cameras.{camera}.parent_frame is "
            f"{entry.parent_frame!r}, the simulator needs {parent!r}"
        )
    return np.asarray(entry.T_parent_child(), dtype=np.float64)


def told_frames(
    config, scene_cam_tf: str = "nominal", wrist_cam_tf: str = "nominal", calibration_file: str = ""
) -> ToldFrames:
    """The transforms to publish for a :class:`para_ros.sim.yam_scene.SimConfig` (see the module docstring).

    :raises ValueError: an unknown choice, or ``calibration`` without a file holding that camera.
    """
    if scene_cam_tf not in SCENE_CAM_TF_CHOICES:
        raise ValueError(f"scene_cam_tf={scene_cam_tf!r}: use one of {SCENE_CAM_TF_CHOICES}")
    if wrist_cam_tf not in WRIST_CAM_TF_CHOICES:
        raise ValueError(f"wrist_cam_tf={wrist_cam_tf!r}: use one of {WRIST_CAM_TF_CHOICES}")
    scene = {
        "nominal": config.scene_cam_T_world_cam,
        "truth": config.scene_cam_true_T_world_cam,
        "none": lambda: None,
        "calibration": lambda: _calibration_camera_T(calibration_file, "scene_cam", "base"),
    }[scene_cam_tf]()
    if wrist_cam_tf == "calibration":
        wrist = _calibration_camera_T(calibration_file, "wrist_cam", "gripper")
    else:
        wrist = config.wrist_cam_true_T_gripper_cam()
        if wrist_cam_tf == "nominal" and config.wrist_cam_true_offset_T is not None:
            wrist = wrist @ np.linalg.inv(np.asarray(config.wrist_cam_true_offset_T).reshape(4, 4))
    return ToldFrames(scene, wrist)
