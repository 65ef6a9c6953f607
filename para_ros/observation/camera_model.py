"""The camera model at the ROS boundary: ``CameraInfo`` <-> the intrinsics ``para_core`` takes.

Two pixel conventions meet here, and this module is the ROS side's only converter between them:

* ROS ``CameraInfo`` (and OpenCV's calibration / ``cv2.projectPoints``): the centre of pixel (col, row) is at the
  integer coordinates (col, row); an image W pixels wide centred on the optical axis has cx = (W - 1) / 2.
* ``para_core`` (docs/contracts.md): pixel (col, row) covers [col, col + 1); its centre is at (col + 0.5, row + 0.5);
  that centred camera has cx = W / 2. This makes a resize by s exact (u -> s u) for the policy's preprocessing.

So ``K_para = K_ros + 0.5`` on cx and cy (focal lengths and skew unchanged), by
:mod:`para_core.model.pixel_convention` (the one implementation; a LeRobot export converts with it too). Which matrix
is used: ``k`` for raw images (``image_raw``, no distortion correction is applied by PARA, so a non-zero ``d`` is
reported), or ``p[:3, :3]`` for rectified images (``image_rect``), chosen by the node's ``camera_matrix`` parameter.
"""

from __future__ import annotations

import numpy as np

from para_core.model.pixel_convention import (  # noqa: F401 - re-exported: the ROS side's converters
    ROS_TO_PARA_PIXEL_OFFSET,
    para_K_to_ros,
    ros_K_to_para,
)

CAMERA_MATRICES = ("k", "p")


def camera_info_fields(K_para: np.ndarray) -> dict:
    """``k``, ``p``, ``r``, ``d`` lists of a distortion-free CameraInfo for ``para_core`` intrinsics ``K_para``."""
    K = para_K_to_ros(K_para)
    P = np.hstack([K, np.zeros((3, 1))])  # (3, 4)
    return {
        "k": [float(v) for v in K.ravel()],
        "p": [float(v) for v in P.ravel()],
        "r": [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
        "d": [0.0] * 5,
        "distortion_model": "plumb_bob",
    }


def intrinsics_from_camera_info(info, image_width: int, image_height: int, matrix: str = "k") -> np.ndarray:
    """(3, 3) float64 ``para_core`` K of an image of ``image_width`` x ``image_height`` from its ``CameraInfo``.

    :param matrix: ``"k"`` (raw images) or ``"p"`` (rectified images: the left 3x3 of the projection matrix).
    :raises ValueError: naming the problem: all-zero or non-finite matrix, non-positive focal lengths, a last row that
        is not [0, 0, 1], or an image whose size differs from the CameraInfo's (K would not describe it).
    """
    if matrix not in CAMERA_MATRICES:
        raise ValueError(f"camera_matrix={matrix!r}: use 'k' (raw images) or 'p' (rectified images)")
    K = (
        np.asarray(info.k, dtype=np.float64).reshape(3, 3)
        if matrix == "k"
        else np.asarray(info.p, dtype=np.float64).reshape(3, 4)[:, :3]
    )
    name = "K" if matrix == "k" else "P"
    if not np.all(np.isfinite(K)):
        raise ValueError(f"CameraInfo {name} contains non-finite values {K.ravel().tolist()}")
    if not np.any(K):
        raise ValueError(
            f"CameraInfo {name} is all zeros (uncalibrated camera?): calibrate it or publish the intrinsics"
        )
    if K[0, 0] <= 0 or K[1, 1] <= 0 or np.abs(K[2] - [0.0, 0.0, 1.0]).max() > 1e-9:
        raise ValueError(
            f"CameraInfo {name}={K.ravel().tolist()} is not a pinhole matrix (need fx, fy > 0 and last row [0, 0, 1])"
        )
    if (int(info.width), int(info.height)) != (int(image_width), int(image_height)):
        raise ValueError(
            f"image is {image_width}x{image_height} but its CameraInfo says {info.width}x{info.height}: "
            "K does not describe this image (resized without updating CameraInfo?)"
        )
    return ros_K_to_para(K)


def distortion_ignored(info, matrix: str = "k") -> str | None:
    """A warning when raw-image intrinsics come with non-zero distortion that PARA does not correct, else None."""
    d = np.asarray(info.d, dtype=np.float64)
    if matrix == "k" and d.size and np.any(np.abs(d) > 1e-9):
        return (
            f"CameraInfo has non-zero distortion d={d.round(5).tolist()} that PARA does not correct: subscribe to "
            "the rectified image (image_rect) and set camera_matrix:=p"
        )
    return None
