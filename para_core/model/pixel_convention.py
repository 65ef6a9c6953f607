"""The two pixel conventions of intrinsics, and the one pair of functions that converts between them.

* ROS ``CameraInfo`` and OpenCV (``cv2.calibrateCamera``, ``cv2.projectPoints``): the centre of pixel (col, row) is at
  the integer coordinates (col, row); an image W pixels wide centred on the optical axis has cx = (W - 1) / 2
  (127.5 for 256 pixels).
* ``para_core`` (docs/contracts.md): pixel (col, row) covers [col, col + 1); its centre is at (col + 0.5, row + 0.5);
  that centred camera has cx = W / 2 (128.0). This makes a resize by s exact (u -> s u) for the policy's
  preprocessing.

So ``K_para = K_opencv`` with cx, cy + 0.5 (focal lengths and skew unchanged). Everything at a boundary (CameraInfo,
calibration.yaml, a LeRobot export) speaks OpenCV's convention and converts here.
"""

from __future__ import annotations

import numpy as np

ROS_TO_PARA_PIXEL_OFFSET = 0.5  # pixels added to cx, cy going from the OpenCV / ROS convention to para_core's


def ros_K_to_para(K_ros: np.ndarray) -> np.ndarray:  # noqa: N802 - K is the standard name
    """(3, 3) ROS/OpenCV intrinsics -> ``para_core`` pixel-centre convention (cx, cy + 0.5)."""
    K = np.array(K_ros, dtype=np.float64).reshape(3, 3)
    K[0, 2] += ROS_TO_PARA_PIXEL_OFFSET * K[2, 2]
    K[1, 2] += ROS_TO_PARA_PIXEL_OFFSET * K[2, 2]
    return K


def para_K_to_ros(K_para: np.ndarray) -> np.ndarray:  # noqa: N802
    """(3, 3) ``para_core`` intrinsics -> ROS/OpenCV convention (cx, cy - 0.5): what a CameraInfo carries."""
    K = np.array(K_para, dtype=np.float64).reshape(3, 3)
    K[0, 2] -= ROS_TO_PARA_PIXEL_OFFSET * K[2, 2]
    K[1, 2] -= ROS_TO_PARA_PIXEL_OFFSET * K[2, 2]
    return K
