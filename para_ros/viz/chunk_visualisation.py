"""What rviz shows of one predicted chunk, as numpy (metres, the world frame): the path with each step's confidence,
the tool at the observation time, the most probable voxels, and optionally the first camera's image with the tool
frame and the path drawn. The inference node only turns it into messages (``para_ros.ros_io.rviz``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the types only: importing the policy loads torch
    from para_core.model.policy import CameraObservation, PolicyOutput

MARKER_SIZE_RANGE_M = (0.004, 0.05)  # the step markers: the voxel pitch, clipped so they stay visible and apart


@dataclass
class Visualisation:
    """What rviz shows of a chunk (numpy, metres)."""

    positions_world: np.ndarray  # (T, 3) the chunk's path
    confidence: np.ndarray  # (T,)
    ee_xyz: np.ndarray  # (3,) the tool at the observation time
    voxel_size_m: float  # marker size: the voxel pitch, clipped to MARKER_SIZE_RANGE_M
    top_voxels_world: np.ndarray  # (K, 3) the most probable voxels
    top_voxels_prob: np.ndarray  # (K,)
    overlay_rgb: np.ndarray | None = None  # (H, W, 3) uint8: the first view with the tool frame and the path drawn
    overlay_frame: str = ""  # the TF frame of the overlay's camera (its image's frame id)


def voxel_size_m(output: PolicyOutput, pred_size: int) -> float:
    """The voxel pitch of the prediction grid (the grid's widest span over ``pred_size`` cells), clipped to
    :data:`MARKER_SIZE_RANGE_M`."""
    span = output.voxel_bounds_world[1] - output.voxel_bounds_world[0]  # (3,)
    return float(np.clip(np.max(span) / max(pred_size, 1), *MARKER_SIZE_RANGE_M))


def overlay_rgb(camera: CameraObservation, T_world_ee: np.ndarray, positions_world: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8: ``camera``'s image with the tool frame and the predicted path
    (``para_core.eval.calibration.overlay_image``)."""
    from para_core.eval.calibration import overlay_image  # OpenCV drawing, only when the overlay is on

    return overlay_image(camera.image_rgb, camera.K, camera.T_world_cam, T_world_ee, positions_world)


def chunk_visualisation(
    output: PolicyOutput,
    T_world_ee: np.ndarray,
    pred_size: int,
    overlay_camera: CameraObservation | None = None,
    overlay_frame: str = "",
) -> Visualisation:
    """The visualisation of ``output`` (the chunk of an observation whose tool pose was ``T_world_ee``, (4, 4));
    with ``overlay_camera``, its overlay image too."""
    T_world_ee = np.asarray(T_world_ee)
    return Visualisation(
        output.positions_world,
        output.confidence,
        T_world_ee[:3, 3],
        voxel_size_m(output, pred_size),
        output.top_voxels_world,
        output.top_voxels_prob,
        None if overlay_camera is None else overlay_rgb(overlay_camera, T_world_ee, output.positions_world),
        overlay_frame,
    )
