"""The live calibration monitor's ArUco marker, stuck on the simulated gripper.

A thin textured box on body ``gripper`` (the joint6 flange) whose printed face carries
:meth:`para_core.calibration.marker.ArucoMarkerSpec.image`, mapped exactly as the ChArUco board of
:mod:`para_ros.sim.calibration_board` is (the marker frame follows the board frame's convention: x along the image's
columns, y along its rows, z into the marker). The body ``calibration_marker`` IS the marker frame, so
``YamSim.T_parent_child("gripper", "calibration_marker")`` is the mount the monitor is told (``T_flange_marker``).

Default mount: on the gripper's side facing the default scene camera at the start pose (the flange board's
direction, :data:`para_ros.sim.calibration_board.FLANGE_BOARD_NORMAL`), a few centimetres from the flange, as a user
would stick a 5 cm marker where the scene camera sees it while the arm works.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from para_ros.sim.calibration_board import (
    FACE_THICKNESS_M,
    R_GEOM_BOARD,
    _quat_wxyz,
    add_matte_material,
    add_visual_box,
)

MARKER_BODY = "calibration_marker"
MARKER_FACE_GEOM = "calibration_marker_face"
MARKER_BACKING_GEOM = "calibration_marker_backing"
MARKER_MOUNTS = ("none", "flange")
# In the gripper frame (x: finger opening direction, z: along the fingers): the marker's centre and its face's
# outward normal; at the sim's start pose this faces the default scene camera (beside the table, 0.6 m up).
DEFAULT_MARKER_CENTRE_M = (0.045, 0.0, 0.03)
DEFAULT_MARKER_NORMAL = (0.86, 0.0, -0.51)
PX_PER_CELL = 32


def default_T_gripper_marker(side_m: float) -> np.ndarray:
    """(4, 4) default marker frame in ``gripper`` (see the module docstring)."""
    n = np.asarray(DEFAULT_MARKER_NORMAL, dtype=np.float64)
    n /= np.linalg.norm(n)
    z_m = -n  # into the marker
    x_m = np.array([0.0, 1.0, 0.0])
    y_m = np.cross(z_m, x_m)
    T = np.eye(4)
    T[:3, :3] = np.stack([x_m, y_m, z_m], axis=1)
    T[:3, 3] = np.asarray(DEFAULT_MARKER_CENTRE_M) - T[:3, :3] @ np.array([side_m / 2.0, side_m / 2.0, 0.0])
    return T


@dataclass
class MarkerMount:
    """An ArUco marker on body ``gripper``.

    Args:
        spec: the marker (:class:`para_core.calibration.marker.ArucoMarkerSpec`).
        T_gripper_marker: (4, 4) marker frame in ``gripper``; None = :func:`default_T_gripper_marker`.
        margin_m: white border around the black square (the detector's quiet zone), metres.
    """

    spec: object
    T_gripper_marker: object = None
    margin_m: float = 0.008

    def __post_init__(self):
        if self.T_gripper_marker is None:
            self.T_gripper_marker = default_T_gripper_marker(float(self.spec.side_m))
        T = np.asarray(self.T_gripper_marker, dtype=np.float64).reshape(4, 4)
        R = T[:3, :3]
        if not (np.all(np.isfinite(T)) and np.allclose(R @ R.T, np.eye(3), atol=1e-6) and np.linalg.det(R) > 0):
            raise ValueError("MarkerMount.T_gripper_marker: give a rigid 4x4 transform (orthonormal, right-handed)")
        self.T_gripper_marker = T
        if not 0.0 <= float(self.margin_m) <= 0.05:
            raise ValueError(f"MarkerMount.margin_m={self.margin_m}: give 0..0.05 m")

    def add_to_spec(self, spec) -> None:
        """Add the marker (texture, material, body ``calibration_marker`` = the marker frame, a printed face and a
        backing) under ``gripper`` of an ``mujoco.MjSpec``; no collision, no mass."""

        px_per_m = PX_PER_CELL * self.spec.cells / float(self.spec.side_m)
        margin_px = int(round(float(self.margin_m) * px_per_m))
        margin_m = margin_px / px_per_m
        grey = self.spec.image(PX_PER_CELL, margin_px=margin_px)  # (H, W)
        rgb = np.repeat(grey[:, :, None], 3, axis=2)
        H, W = rgb.shape[:2]
        half_x, half_y = W / (2.0 * px_per_m), H / (2.0 * px_per_m)
        material = add_matte_material(spec, "calibration_marker", rgb)
        body = spec.body("gripper").add_body()
        body.name = MARKER_BODY
        body.pos = self.T_gripper_marker[:3, 3].tolist()
        body.quat = _quat_wxyz(self.T_gripper_marker[:3, :3])
        origin_g = np.array([-half_x + margin_m, half_y - margin_m, FACE_THICKNESS_M / 2.0])  # marker origin in geom
        R_marker_geom = R_GEOM_BOARD.T
        centre_face = R_marker_geom @ (-origin_g)
        backing_half_z = 0.001
        for name, half_z, centre, face_material in (
            (MARKER_FACE_GEOM, FACE_THICKNESS_M / 2.0, centre_face, material),
            (MARKER_BACKING_GEOM, backing_half_z, centre_face + [0.0, 0.0, 0.0002 + backing_half_z], None),
        ):
            add_visual_box(body, name, (half_x, half_y, half_z), centre, R_marker_geom, face_material)
        body.mass = 0.0
