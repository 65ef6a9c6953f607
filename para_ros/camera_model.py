"""CameraInfo -> the pinhole intrinsics ``para_core`` takes, with the checks a live camera stream needs.

Convention (docs/contracts.md): OpenCV pinhole, pixel centres at integer + 0.5 in continuous coordinates, which is
what ROS ``CameraInfo.k`` means for a rectified (or distortion-free) image. Distortion is not applied by PARA: feed
rectified images (``image_rect``) or a camera with negligible distortion; non-zero ``d`` is reported, not corrected.
"""
from __future__ import annotations

import numpy as np


def intrinsics_from_camera_info(info, image_width: int, image_height: int) -> np.ndarray:
    """(3, 3) float64 K of an image of ``image_width`` x ``image_height`` from its ``CameraInfo``.

    :raises ValueError: naming the problem: all-zero or non-finite K, non-positive focal lengths, a last row that is
        not [0, 0, 1], or an image whose size differs from the CameraInfo's (K would not describe it).
    """
    K = np.asarray(info.k, dtype=np.float64).reshape(3, 3)
    if not np.all(np.isfinite(K)):
        raise ValueError(f"CameraInfo K contains non-finite values {K.ravel().tolist()}")
    if not np.any(K):
        raise ValueError("CameraInfo K is all zeros (uncalibrated camera?): calibrate it or publish the intrinsics")
    if K[0, 0] <= 0 or K[1, 1] <= 0 or np.abs(K[2] - [0.0, 0.0, 1.0]).max() > 1e-9:
        raise ValueError(f"CameraInfo K={K.ravel().tolist()} is not a pinhole matrix (need fx, fy > 0 and last row "
                         "[0, 0, 1])")
    if (int(info.width), int(info.height)) != (int(image_width), int(image_height)):
        raise ValueError(f"image is {image_width}x{image_height} but its CameraInfo says {info.width}x{info.height}: "
                         "K does not describe this image (resized without updating CameraInfo?)")
    return K
