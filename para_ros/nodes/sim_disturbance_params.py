"""The sim node's parameters for run-time out-of-distribution conditions and the calibration monitor's marker.

Kept out of ``sim_node`` so the node only splices :data:`DISTURBANCE_PARAMS` and :data:`MARKER_PARAMS` into its
table, builds :func:`disturbance_config_from_params` / :func:`marker_mount_from_params` and passes their model
additions as ``SimConfig.scene_extras``. Every condition is off by default (the model and the images are then those
of the training scene).
"""

from __future__ import annotations

from para_ros.nodes.parameters import Param
from para_ros.sim.calibration_board import offset_T
from para_ros.sim.calibration_marker import MARKER_MOUNTS, MarkerMount
from para_ros.sim.disturbances import (
    CAMERA_FAULT_CAMERAS,
    CAMERA_FAULT_KINDS,
    CameraFault,
    CameraKnock,
    DisturbanceConfig,
    HandOccluder,
)

DISTURBANCE_PARAMS = [
    Param(
        "ood_knock_at_s",
        -1.0,
        "Knock the scene camera at this episode time (s since the last reset; -1 = never): from then on it is "
        "rendered moved by ood_knock_xyz_m / ood_knock_rpy_deg while /tf_static keeps the pose it told.",
        range=(-1.0, 1e6),
        section="run-time out-of-distribution conditions (para_ros/sim/disturbances.py)",
    ),
    Param("ood_knock_xyz_m", [0.0, 0.0, 0.0], "The knock's translation (m, scene camera optical frame).", length=3),
    Param(
        "ood_knock_rpy_deg", [0.0, 0.0, 0.0], "The knock's roll-pitch-yaw (deg, scene camera optical frame).", length=3
    ),
    Param(
        "ood_camera_fault",
        "none",
        "none | covered (black images) | frozen (the last image before ood_camera_fault_at_s, again and "
        "again); stamps, CameraInfo and TF go on.",
        choices=CAMERA_FAULT_KINDS,
    ),
    Param(
        "ood_camera_fault_camera", "scene", "Camera of the fault: scene | wrist | both.", choices=CAMERA_FAULT_CAMERAS
    ),
    Param(
        "ood_camera_fault_at_s", 0.0, "Episode time the camera fault starts (s since the last reset).", range=(0.0, 1e6)
    ),
    Param(
        "ood_occluder_at_s",
        -1.0,
        "A hand-like capsule (visual only) appears over the workspace at this episode time (s; -1 = never; the "
        "model holds it only when set).",
        range=(-1.0, 1e6),
    ),
    Param("ood_occluder_xyz_m", [0.33, 0.0, 0.14], "The occluder's centre in base (m).", length=3),
    Param("ood_occluder_radius_m", 0.04, "The occluder's radius (m).", range=(0.005, 0.3)),
    Param("ood_occluder_half_length_m", 0.10, "Half the length of its straight part (m).", range=(0.0, 0.5)),
    Param("ood_occluder_yaw_deg", 0.0, "Its axis in the table plane (deg from base x).", range=(-360.0, 360.0)),
]

MARKER_PARAMS = [
    Param(
        "calibration_marker",
        "none",
        "ArUco marker for the live calibration monitor: none | flange (on body gripper, facing the scene "
        "camera at the start pose).",
        choices=MARKER_MOUNTS,
        section="live calibration monitor's marker (para_ros/sim/calibration_marker.py)",
    ),
    Param("calibration_marker_side_m", 0.05, "The marker's black square side (m).", range=(0.005, 0.5)),
    Param("calibration_marker_id", 0, "The marker's id in its dictionary.", range=(0, 999)),
    Param("calibration_marker_dictionary", "DICT_4X4_50", "OpenCV ArUco dictionary of the marker."),
    Param(
        "calibration_marker_xyz_m",
        None,
        "Marker frame origin (its top-left outer corner) in gripper (m); unset = the default mount.",
        optional=True,
        length=3,
        kind_override="float_list",
    ),
    Param(
        "calibration_marker_rpy_deg",
        None,
        "Marker frame orientation in gripper, roll-pitch-yaw (deg; z into the marker); unset = the default.",
        optional=True,
        length=3,
        kind_override="float_list",
    ),
]


def disturbance_config_from_params(p: dict) -> DisturbanceConfig:
    """The :class:`para_ros.sim.disturbances.DisturbanceConfig` the parameters describe."""
    knock = None
    if p["ood_knock_at_s"] >= 0.0:
        knock = CameraKnock(p["ood_knock_at_s"], p["ood_knock_xyz_m"], p["ood_knock_rpy_deg"])
    fault = None
    if p["ood_camera_fault"] != "none":
        fault = CameraFault(p["ood_camera_fault"], p["ood_camera_fault_camera"], p["ood_camera_fault_at_s"])
    occluder = None
    if p["ood_occluder_at_s"] >= 0.0:
        occluder = HandOccluder(
            p["ood_occluder_at_s"],
            p["ood_occluder_xyz_m"],
            p["ood_occluder_radius_m"],
            p["ood_occluder_half_length_m"],
            p["ood_occluder_yaw_deg"],
        )
    return DisturbanceConfig(knock, fault, occluder)


def marker_spec_from_params(p: dict):
    """The :class:`para_core.calibration.marker.ArucoMarkerSpec` the parameters describe."""
    from para_core.calibration.marker import ArucoMarkerSpec  # OpenCV: loaded only when the marker is configured

    return ArucoMarkerSpec(
        side_m=float(p["calibration_marker_side_m"]),
        marker_id=int(p["calibration_marker_id"]),
        dictionary=str(p["calibration_marker_dictionary"]),
    )


def marker_mount_from_params(p: dict) -> MarkerMount | None:
    """The marker on the gripper, or None (``calibration_marker: none``)."""
    if p["calibration_marker"] == "none":
        return None
    mount = MarkerMount(marker_spec_from_params(p))
    xyz, rpy = p["calibration_marker_xyz_m"], p["calibration_marker_rpy_deg"]
    T = mount.T_gripper_marker.copy()
    if xyz is not None and len(xyz):
        T[:3, 3] = xyz
    if rpy is not None and len(rpy):
        T[:3, :3] = offset_T((0, 0, 0), rpy)[:3, :3]
    return MarkerMount(mount.spec, T)
