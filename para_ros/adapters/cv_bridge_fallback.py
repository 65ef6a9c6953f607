"""The project's small implementation of the ``cv_bridge`` Python contract, used where cv_bridge is not installed.

Same names and signatures as upstream (``CvBridge().imgmsg_to_cv2(msg, desired_encoding="passthrough")`` etc.).
Do not import this module from node code: import :mod:`para_ros.adapters.cv_bridge`, which picks upstream when present.

Supported: the 8-bit colour/mono encodings ``rgb8 bgr8 rgba8 bgra8 mono8`` (converted among each other with OpenCV,
like upstream's ``cvtColor2``), ``mono16``, and the generic OpenCV names ``{8U,8S,16U,16S,32S,32F,64F}C{1..4}`` (e.g.
``16UC1``, ``32FC1``, ``8UC3``). Rows may be padded (``step`` > ``width * pixel bytes``); big-endian data is
byte-swapped to native. Images are returned as (H, W) for one channel, else (H, W, C), as contiguous copies.
"""

from __future__ import annotations

import re
import sys

import cv2
import numpy as np
from sensor_msgs.msg import CompressedImage, Image


class CvBridgeError(TypeError):
    """An image could not be converted (upstream's CvBridgeError is also a TypeError)."""


_GENERIC = re.compile(r"^(8U|8S|16U|16S|32S|32F|64F)C([1-4])$")
_DEPTH_DTYPES = {
    "8U": np.uint8,
    "8S": np.int8,
    "16U": np.uint16,
    "16S": np.int16,
    "32S": np.int32,
    "32F": np.float32,
    "64F": np.float64,
}
_DTYPE_DEPTHS = {np.dtype(v).name: k for k, v in _DEPTH_DTYPES.items()}
# Named encodings: (dtype, channels).
NAMED_ENCODINGS = {
    "rgb8": (np.uint8, 3),
    "bgr8": (np.uint8, 3),
    "rgba8": (np.uint8, 4),
    "bgra8": (np.uint8, 4),
    "mono8": (np.uint8, 1),
    "mono16": (np.uint16, 1),
}
COLOR_8BIT = ("rgb8", "bgr8", "rgba8", "bgra8", "mono8")
_GRAY = "GRAY"
_CV_NAME = {"rgb8": "RGB", "bgr8": "BGR", "rgba8": "RGBA", "bgra8": "BGRA", "mono8": _GRAY}


def encoding_to_dtype_with_channels(encoding: str) -> tuple[np.dtype, int]:
    """``(dtype, channels)`` of an image encoding, or CvBridgeError naming the supported ones."""
    if encoding in NAMED_ENCODINGS:
        dtype, channels = NAMED_ENCODINGS[encoding]
        return np.dtype(dtype), channels
    match = _GENERIC.match(encoding or "")
    if match:
        return np.dtype(_DEPTH_DTYPES[match.group(1)]), int(match.group(2))
    raise CvBridgeError(
        f"unsupported image encoding {encoding!r}; this bridge handles {sorted(NAMED_ENCODINGS)} and "
        "the OpenCV names like '8UC3', '16UC1', '32FC1' (install ros-<distro>-cv-bridge for more)"
    )


def dtype_with_channels_to_cvtype2(dtype: np.dtype, channels: int) -> str:
    """OpenCV type name such as ``8UC3`` of a numpy dtype and channel count."""
    dtype = np.dtype(dtype)
    if dtype.name not in _DTYPE_DEPTHS or not 1 <= channels <= 4:
        raise CvBridgeError(
            f"arrays of dtype {dtype} with {channels} channels have no image encoding; use one of "
            f"{sorted(_DTYPE_DEPTHS)} with 1..4 channels"
        )
    return f"{_DTYPE_DEPTHS[dtype.name]}C{channels}"


def convert_encoding(image: np.ndarray, src: str, dst: str) -> np.ndarray:
    """Convert ``image`` from encoding ``src`` to ``dst`` (upstream ``cvtColor2`` rules, 8-bit colour family only)."""
    if src == dst:
        return image.copy()
    if src in COLOR_8BIT and dst in COLOR_8BIT:
        code = getattr(cv2, f"COLOR_{_CV_NAME[src]}2{_CV_NAME[dst]}")
        return cv2.cvtColor(image, code)
    src_type, dst_type = encoding_to_dtype_with_channels(src), encoding_to_dtype_with_channels(dst)
    if (src in NAMED_ENCODINGS) != (dst in NAMED_ENCODINGS) and src_type == dst_type:
        return image.copy()  # a generic name (e.g. 8UC3) and a named one of the same layout: same bytes
    raise CvBridgeError(
        f"Unsupported conversion from {src} to {dst}; the fallback bridge converts among "
        f"{list(COLOR_8BIT)} and between a generic type and a named one of the same layout"
    )


class CvBridge:
    """Converts between ``sensor_msgs`` images and numpy arrays (upstream ``cv_bridge.CvBridge`` signatures)."""

    def imgmsg_to_cv2(self, img_msg: Image, desired_encoding: str = "passthrough") -> np.ndarray:
        """Array of an ``Image``: (H, W) for one channel else (H, W, C), in ``desired_encoding``.

        :param img_msg: the message; ``step`` may include row padding.
        :param desired_encoding: ``"passthrough"`` (keep the message's layout) or an encoding to convert to.
        :raises CvBridgeError: unsupported encoding or conversion, or a message whose sizes do not add up.
        """
        dtype, channels = encoding_to_dtype_with_channels(img_msg.encoding)
        height, width, step = int(img_msg.height), int(img_msg.width), int(img_msg.step)
        data = memoryview(img_msg.data).cast("B")
        row_bytes = width * channels * dtype.itemsize
        if step < row_bytes:
            raise CvBridgeError(
                f"Image step {step} is smaller than width {width} x {channels} channels x "
                f"{dtype.itemsize} bytes = {row_bytes} for encoding {img_msg.encoding!r}; fix the "
                "publisher's step"
            )
        if len(data) != step * height:
            raise CvBridgeError(
                f"Image data has {len(data)} bytes but step {step} x height {height} = "
                f"{step * height}; the message is truncated or its step/height are wrong"
            )
        wire = dtype.newbyteorder(">" if img_msg.is_bigendian else "<")
        image = np.ndarray(
            shape=(height, width, channels),
            dtype=wire,
            buffer=data,
            strides=(step, channels * dtype.itemsize, dtype.itemsize),
        )  # (H, W, C) view on data
        image = np.array(image, dtype=dtype, order="C")  # (H, W, C) own copy, native byte order, unpadded
        if channels == 1:
            image = image[:, :, 0]  # (H, W)
        if desired_encoding == "passthrough":
            return image
        return convert_encoding(image, img_msg.encoding, desired_encoding)

    def cv2_to_imgmsg(self, cvim: np.ndarray, encoding: str = "passthrough", header=None) -> Image:
        """``Image`` of an array (H, W) or (H, W, C); ``encoding`` must match its layout (or ``"passthrough"``).

        :param header: optional ``std_msgs/Header`` copied into the message.
        :raises CvBridgeError: layout incompatible with ``encoding``.
        """
        if not isinstance(cvim, np.ndarray):
            raise TypeError(f"Your input type is not a numpy array: {type(cvim)!r}")
        if cvim.ndim not in (2, 3):
            raise CvBridgeError(f"image array has shape {cvim.shape}; give (H, W) or (H, W, C)")
        channels = 1 if cvim.ndim == 2 else cvim.shape[2]
        cv_type = dtype_with_channels_to_cvtype2(cvim.dtype, channels)
        msg = Image()
        if header is not None:
            msg.header = header
        msg.height, msg.width = int(cvim.shape[0]), int(cvim.shape[1])
        if encoding == "passthrough":
            msg.encoding = cv_type
        else:
            expected = dtype_with_channels_to_cvtype2(*encoding_to_dtype_with_channels(encoding))
            if expected != cv_type:
                raise CvBridgeError(f"encoding specified as {encoding}, but image has incompatible type {cv_type}")
            msg.encoding = encoding
        big = cvim.dtype.byteorder == ">" or (cvim.dtype.byteorder == "=" and sys.byteorder == "big")
        msg.is_bigendian = int(big and cvim.dtype.itemsize > 1)
        msg.step = msg.width * channels * cvim.dtype.itemsize
        msg.data = np.ascontiguousarray(cvim).tobytes()
        return msg

    def compressed_imgmsg_to_cv2(
        self, cmprs_img_msg: CompressedImage, desired_encoding: str = "passthrough"
    ) -> np.ndarray:
        """Decode a ``CompressedImage`` (jpeg/png/...). Passthrough gives OpenCV's layout (BGR / BGRA / gray).

        :raises CvBridgeError: undecodable data or unsupported conversion.
        """
        buf = np.frombuffer(memoryview(cmprs_img_msg.data).cast("B"), dtype=np.uint8)  # (N,)
        image = cv2.imdecode(buf, cv2.IMREAD_UNCHANGED) if buf.size else None
        if image is None:
            raise CvBridgeError(
                f"could not decode CompressedImage (format {cmprs_img_msg.format!r}, {buf.size} "
                "bytes); is it a complete jpeg/png?"
            )
        if desired_encoding == "passthrough":
            return image
        return convert_encoding(image, decoded_encoding(image), desired_encoding)

    def cv2_to_compressed_imgmsg(self, cvim: np.ndarray, dst_format: str = "jpg") -> CompressedImage:
        """Encode an OpenCV-layout (BGR / gray) array as a ``CompressedImage`` with ``format = dst_format``."""
        if not isinstance(cvim, np.ndarray):
            raise TypeError(f"Your input type is not a numpy array: {type(cvim)!r}")
        ok, encoded = cv2.imencode("." + dst_format, cvim)
        if not ok:
            raise CvBridgeError(f"OpenCV could not encode a {cvim.dtype} array of shape {cvim.shape} as {dst_format!r}")
        msg = CompressedImage()
        msg.format = dst_format
        msg.data = encoded.tobytes()
        return msg


def decoded_encoding(image: np.ndarray) -> str:
    """Encoding of an array as OpenCV decodes files: gray -> mono8/mono16, 3 channels -> bgr8, 4 -> bgra8."""
    channels = 1 if image.ndim == 2 else image.shape[2]
    if image.dtype == np.uint8:
        return {1: "mono8", 3: "bgr8", 4: "bgra8"}.get(channels) or dtype_with_channels_to_cvtype2(
            image.dtype, channels
        )
    if image.dtype == np.uint16 and channels == 1:
        return "mono16"
    return dtype_with_channels_to_cvtype2(image.dtype, channels)
