"""Stand-in for ``cv_bridge``: the real package when installed (robot PC), else
:mod:`para_ros.adapters.cv_bridge_fallback`; plus :func:`image_msg_to_rgb`, the one way nodes turn camera messages
into the (H, W, 3) uint8 RGB arrays that ``para_core`` takes.

Set ``PARA_FORCE_CV_BRIDGE_FALLBACK=1`` to use the project implementation even where cv_bridge exists.
"""

from __future__ import annotations

import os

import cv2
import numpy as np
from sensor_msgs.msg import CompressedImage, Image

_upstream = None
if os.environ.get("PARA_FORCE_CV_BRIDGE_FALLBACK") != "1":
    try:
        import cv_bridge as _upstream
    except ImportError:
        _upstream = None

USING_UPSTREAM_CV_BRIDGE = _upstream is not None

if USING_UPSTREAM_CV_BRIDGE:
    from cv_bridge import CvBridge, CvBridgeError
else:
    from para_ros.adapters.cv_bridge_fallback import CvBridge, CvBridgeError

# Encodings image_msg_to_rgb accepts for sensor_msgs/Image (8-bit colour or gray; "8UC3" is taken as RGB).
RGB_SOURCE_ENCODINGS = ("rgb8", "bgr8", "rgba8", "bgra8", "mono8", "8UC3")
_DECODED_TO_RGB = {1: cv2.COLOR_GRAY2RGB, 3: cv2.COLOR_BGR2RGB, 4: cv2.COLOR_BGRA2RGB}


def image_msg_to_rgb(msg: Image | CompressedImage, bridge: CvBridge | None = None) -> np.ndarray:
    """(H, W, 3) uint8 RGB array of a camera ``Image`` or ``CompressedImage``.

    :param msg: an ``Image`` in one of :data:`RGB_SOURCE_ENCODINGS`, or a jpeg/png ``CompressedImage`` (colour or gray).
    :param bridge: a CvBridge to reuse (default: a new one).
    :raises CvBridgeError: other encodings (depth, 16-bit), bad sizes, undecodable data.
    """
    bridge = bridge or CvBridge()
    if isinstance(msg, CompressedImage):
        decoded = bridge.compressed_imgmsg_to_cv2(msg)  # OpenCV layout: (H, W) gray, (H, W, 3) BGR or (H, W, 4) BGRA
        channels = 1 if decoded.ndim == 2 else decoded.shape[2]
        if decoded.dtype != np.uint8 or channels not in _DECODED_TO_RGB:
            raise CvBridgeError(
                f"CompressedImage (format {msg.format!r}) decodes to {decoded.dtype} with {channels} "
                "channels; an RGB camera image needs 8-bit gray, BGR or BGRA"
            )
        return np.ascontiguousarray(cv2.cvtColor(decoded, _DECODED_TO_RGB[channels]))  # (H, W, 3)
    if isinstance(msg, Image):
        if msg.encoding not in RGB_SOURCE_ENCODINGS:
            raise CvBridgeError(
                f"Image encoding {msg.encoding!r} is not a colour image; the policy needs one of "
                f"{list(RGB_SOURCE_ENCODINGS)} (point the node at the colour topic, not depth)"
            )
        if msg.encoding == "8UC3":
            rgb = bridge.imgmsg_to_cv2(msg)  # generic 3-channel bytes, taken as RGB as published
        else:
            rgb = bridge.imgmsg_to_cv2(msg, desired_encoding="rgb8")
        return np.ascontiguousarray(rgb, dtype=np.uint8)  # (H, W, 3)
    raise CvBridgeError(f"expected sensor_msgs/Image or CompressedImage, got {type(msg).__name__}")


__all__ = ["CvBridge", "CvBridgeError", "image_msg_to_rgb", "USING_UPSTREAM_CV_BRIDGE", "RGB_SOURCE_ENCODINGS"]
