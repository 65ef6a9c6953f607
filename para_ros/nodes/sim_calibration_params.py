"""The sim node's calibration parameters: a ChArUco board in the scene and camera poses rendered but not told.

Kept out of ``sim_node`` so the node only splices :data:`CALIBRATION_PARAMS` into its table and passes
:func:`sim_config_fields` to :class:`para_ros.sim.yam_scene.SimConfig` and :func:`told_frames_from_params` to its TF.
"""

from __future__ import annotations

import numpy as np

from para_ros.nodes.parameters import Param
from para_ros.sim.calibration_board import BOARD_MOUNTS, BoardMount, default_T_parent_board, offset_T
from para_ros.sim.told_frames import (
    SCENE_CAM_TF_CHOICES,
    WRIST_CAM_TF_CHOICES,
    ToldFrames,
    told_frames,
)

CALIBRATION_PARAMS = [
    Param(
        "calibration_board",
        "none",
        "ChArUco board in the scene: none | flange (on body gripper, the joint6 flange) "
        "| table (face up on the table); rendered by both cameras.",
        choices=BOARD_MOUNTS,
        section="camera calibration (para-calib; para_ros/sim/calibration_board.py)",
    ),
    Param(
        "calibration_board_xyz_m",
        None,
        "Board frame origin in its parent (gripper for flange, base for table), m; "
        "unset = the mount's default (flange: a plate beyond the finger tips; table: centred on the workspace).",
        optional=True,
        length=3,
        kind_override="float_list",
    ),
    Param(
        "calibration_board_rpy_deg",
        None,
        "Board frame orientation in its parent, roll-pitch-yaw (deg); unset = "
        "the mount's default (board face along the fingers / face up).",
        optional=True,
        length=3,
        kind_override="float_list",
    ),
    Param("board_squares_x", 5, "Board squares along x.", range=(3, 100)),
    Param("board_squares_y", 7, "Board squares along y.", range=(3, 100)),
    Param("board_square_m", 0.03, "Board square side (m).", range=(0.001, 1.0)),
    Param("board_marker_m", 0.022, "Board ArUco marker side (m), smaller than the square.", range=(0.001, 1.0)),
    Param("board_dictionary", "DICT_5X5_100", "OpenCV ArUco dictionary of the board."),
    Param(
        "scene_cam_true_offset_xyz_m",
        [0.0, 0.0, 0.0],
        "The scene camera is RENDERED this far from its configured "
        "pose (m, in its own optical frame); what TF says is scene_cam_tf.",
        length=3,
    ),
    Param(
        "scene_cam_true_offset_rpy_deg",
        [0.0, 0.0, 0.0],
        "... and turned by this roll-pitch-yaw (deg, optical frame).",
        length=3,
    ),
    Param(
        "wrist_cam_true_offset_xyz_m",
        [0.0, 0.0, 0.0],
        "The wrist camera is RENDERED this far from the "
        "config/yam.yaml mount (m, in its optical frame); what TF says is wrist_cam_tf.",
        length=3,
    ),
    Param("wrist_cam_true_offset_rpy_deg", [0.0, 0.0, 0.0], "... and turned by this roll-pitch-yaw (deg).", length=3),
    Param(
        "scene_cam_tf",
        "nominal",
        "base -> scene camera transform on /tf_static: nominal (the configured pose) | "
        "truth (the rendered pose) | none (not published) | calibration (calibration_file's scene_cam).",
        choices=SCENE_CAM_TF_CHOICES,
    ),
    Param(
        "wrist_cam_tf",
        "nominal",
        "gripper -> wrist camera transform on /tf: nominal (config/yam.yaml) | truth "
        "(the rendered mount) | calibration (calibration_file's wrist_cam).",
        choices=WRIST_CAM_TF_CHOICES,
    ),
    Param(
        "calibration_file", "", "calibration.yaml (para-calib solve) read by scene_cam_tf / wrist_cam_tf = calibration."
    ),
]


def board_spec_from_params(p: dict):
    """The :class:`para_core.calibration.board.CharucoBoardSpec` the parameters describe."""
    from para_core.calibration.board import CharucoBoardSpec  # OpenCV: loaded only when the scene has a board

    return CharucoBoardSpec(
        squares_x=int(p["board_squares_x"]),
        squares_y=int(p["board_squares_y"]),
        square_m=float(p["board_square_m"]),
        marker_m=float(p["board_marker_m"]),
        dictionary=str(p["board_dictionary"]),
    )


def sim_config_fields(p: dict) -> dict:
    """``SimConfig`` keyword arguments for the board and the true camera offsets."""
    board = None
    if p["calibration_board"] != "none":
        spec = board_spec_from_params(p)
        T = default_T_parent_board(p["calibration_board"], spec.size_m)
        xyz, rpy = p["calibration_board_xyz_m"], p["calibration_board_rpy_deg"]
        if xyz is not None and len(xyz):
            T[:3, 3] = xyz
        if rpy is not None and len(rpy):
            T[:3, :3] = offset_T((0, 0, 0), rpy)[:3, :3]
        board = BoardMount(spec, p["calibration_board"], T)
    scene = offset_T(p["scene_cam_true_offset_xyz_m"], p["scene_cam_true_offset_rpy_deg"])
    wrist = offset_T(p["wrist_cam_true_offset_xyz_m"], p["wrist_cam_true_offset_rpy_deg"])
    return {
        "calibration_board": board,
        "scene_cam_true_offset_T": None if np.allclose(scene, np.eye(4)) else scene,
        "wrist_cam_true_offset_T": None if np.allclose(wrist, np.eye(4)) else wrist,
    }


def told_frames_from_params(p: dict, config) -> ToldFrames:
    """What the node publishes for the cameras (:func:`para_ros.sim.told_frames.told_frames`)."""
    return told_frames(config, p["scene_cam_tf"], p["wrist_cam_tf"], p["calibration_file"])
