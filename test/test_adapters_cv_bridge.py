"""cv_bridge stand-in (para_ros.adapters.cv_bridge): round trips against numpy byte layouts, hand-padded rows,
big-endian data, colour conversions against numpy/formula references, error cases, compressed jpg/png."""

from __future__ import annotations

import numpy as np
import pytest
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header

from para_ros.adapters.cv_bridge import CvBridge, CvBridgeError, image_msg_to_rgb

H, W = 5, 7
LAYOUTS = {
    "rgb8": (np.uint8, 3),
    "bgr8": (np.uint8, 3),
    "rgba8": (np.uint8, 4),
    "bgra8": (np.uint8, 4),
    "mono8": (np.uint8, 1),
    "mono16": (np.uint16, 1),
    "16UC1": (np.uint16, 1),
    "32FC1": (np.float32, 1),
    "8UC3": (np.uint8, 3),
}


def random_image(dtype, channels, seed=0, h=H, w=W):
    rng = np.random.default_rng(seed)
    shape = (h, w) if channels == 1 else (h, w, channels)
    if np.dtype(dtype).kind == "f":
        return rng.normal(size=shape).astype(dtype)
    return rng.integers(0, np.iinfo(dtype).max, size=shape, endpoint=True).astype(dtype)


def hand_message(arr, encoding, pad_bytes=0, big_endian=False):
    """Image message built with numpy only: each row's bytes followed by ``pad_bytes`` junk bytes."""
    wire = arr.astype(arr.dtype.newbyteorder(">" if big_endian else "<"))
    rows = wire.reshape(arr.shape[0], -1).view(np.uint8)  # (H, row_bytes)
    junk = np.full((arr.shape[0], pad_bytes), 0xAB, np.uint8)
    msg = Image(height=arr.shape[0], width=arr.shape[1], encoding=encoding, is_bigendian=int(big_endian))
    msg.step = rows.shape[1] + pad_bytes
    msg.data = np.concatenate([rows, junk], axis=1).tobytes()
    return msg


@pytest.mark.parametrize("encoding", list(LAYOUTS))
def test_round_trip_each_encoding(encoding):
    dtype, channels = LAYOUTS[encoding]
    arr = random_image(dtype, channels, seed=len(encoding))
    bridge = CvBridge()
    msg = bridge.cv2_to_imgmsg(arr, encoding)
    assert (msg.height, msg.width, msg.encoding) == (H, W, encoding)
    assert msg.step == W * channels * np.dtype(dtype).itemsize
    assert bytes(msg.data) == arr.tobytes()  # row-major, native (little-endian here) bytes
    back = bridge.imgmsg_to_cv2(msg)
    assert back.dtype == arr.dtype and back.shape == arr.shape
    np.testing.assert_array_equal(back, arr)
    # And from a message built by hand with numpy (the publisher side of another stack).
    np.testing.assert_array_equal(bridge.imgmsg_to_cv2(hand_message(arr, encoding)), arr)


@pytest.mark.parametrize(
    "encoding, pad", [("rgb8", 3), ("mono8", 1), ("bgra8", 12), ("mono16", 6), ("32FC1", 4), ("16UC1", 1)]
)
def test_padded_rows(encoding, pad):
    dtype, channels = LAYOUTS[encoding]
    arr = random_image(dtype, channels, seed=pad)
    out = CvBridge().imgmsg_to_cv2(hand_message(arr, encoding, pad_bytes=pad))
    np.testing.assert_array_equal(out, arr)
    assert out.flags.c_contiguous and out.flags.writeable


@pytest.mark.parametrize("encoding", ["16UC1", "mono16", "32FC1"])
def test_big_endian_data_is_swapped_to_native(encoding):
    dtype, channels = LAYOUTS[encoding]
    arr = random_image(dtype, channels, seed=9)
    out = CvBridge().imgmsg_to_cv2(hand_message(arr, encoding, pad_bytes=2, big_endian=True))
    assert out.dtype.isnative
    np.testing.assert_array_equal(out, arr)


def test_colour_conversions_against_numpy():
    bridge = CvBridge()
    rgb = random_image(np.uint8, 3, seed=1)
    rgba = random_image(np.uint8, 4, seed=2)
    gray = random_image(np.uint8, 1, seed=3)
    msg_rgb = bridge.cv2_to_imgmsg(rgb, "rgb8")
    np.testing.assert_array_equal(bridge.imgmsg_to_cv2(msg_rgb, "bgr8"), rgb[..., ::-1])
    np.testing.assert_array_equal(bridge.imgmsg_to_cv2(msg_rgb, "rgb8"), rgb)
    np.testing.assert_array_equal(bridge.imgmsg_to_cv2(bridge.cv2_to_imgmsg(rgb, "bgr8"), "rgb8"), rgb[..., ::-1])
    luma = 0.299 * rgb[..., 0] + 0.587 * rgb[..., 1] + 0.114 * rgb[..., 2]  # ITU-R BT.601, as OpenCV
    assert np.abs(bridge.imgmsg_to_cv2(msg_rgb, "mono8").astype(float) - luma).max() <= 1.0
    np.testing.assert_array_equal(
        bridge.imgmsg_to_cv2(bridge.cv2_to_imgmsg(gray, "mono8"), "rgb8"), np.repeat(gray[..., None], 3, axis=2)
    )
    np.testing.assert_array_equal(bridge.imgmsg_to_cv2(bridge.cv2_to_imgmsg(rgba, "rgba8"), "rgb8"), rgba[..., :3])
    np.testing.assert_array_equal(bridge.imgmsg_to_cv2(bridge.cv2_to_imgmsg(rgba, "bgra8"), "rgb8"), rgba[..., 2::-1])
    np.testing.assert_array_equal(bridge.imgmsg_to_cv2(bridge.cv2_to_imgmsg(rgb, "8UC3"), "rgb8"), rgb)


def test_passthrough_names_opencv_type_and_header_is_kept():
    header = Header(frame_id="scene_cam")
    header.stamp.sec = 12
    msg = CvBridge().cv2_to_imgmsg(random_image(np.float32, 1), header=header)
    assert msg.encoding == "32FC1" and msg.header.frame_id == "scene_cam" and msg.header.stamp.sec == 12
    assert CvBridge().cv2_to_imgmsg(random_image(np.uint8, 3)).encoding == "8UC3"


def test_errors_are_clear():
    bridge = CvBridge()
    arr = random_image(np.uint8, 3)
    msg = hand_message(arr, "rgb8")
    bad_encoding = hand_message(arr, "rgb8")
    bad_encoding.encoding = "yuv422_unknown"
    with pytest.raises(CvBridgeError, match="yuv422_unknown"):
        bridge.imgmsg_to_cv2(bad_encoding)
    truncated = hand_message(arr, "rgb8")
    truncated.data = bytes(msg.data)[:-1]
    with pytest.raises(CvBridgeError, match="bytes"):
        bridge.imgmsg_to_cv2(truncated)
    short_step = hand_message(arr, "rgb8")
    short_step.step = W * 3 - 1
    short_step.data = bytes(short_step.step * H)
    with pytest.raises(CvBridgeError, match="step"):
        bridge.imgmsg_to_cv2(short_step)
    with pytest.raises(CvBridgeError, match="incompatible"):
        bridge.cv2_to_imgmsg(random_image(np.float32, 1), "rgb8")
    with pytest.raises(CvBridgeError):
        bridge.imgmsg_to_cv2(hand_message(random_image(np.float32, 1), "32FC1"), "rgb8")
    assert issubclass(CvBridgeError, Exception)


def smooth_bgr(h=48, w=64):
    yy, xx = np.mgrid[0:h, 0:w]
    return np.stack([xx * 4, yy * 5, (xx + yy) * 2], axis=2).clip(0, 255).astype(np.uint8)  # (H, W, 3)


def test_compressed_png_is_exact_and_jpg_is_close():
    bridge = CvBridge()
    bgr = smooth_bgr()
    png = bridge.cv2_to_compressed_imgmsg(bgr, dst_format="png")
    assert png.format == "png" and bytes(png.data[:4]) == b"\x89PNG"
    np.testing.assert_array_equal(bridge.compressed_imgmsg_to_cv2(png), bgr)
    np.testing.assert_array_equal(bridge.compressed_imgmsg_to_cv2(png, "rgb8"), bgr[..., ::-1])
    gray16 = random_image(np.uint16, 1, seed=4)
    np.testing.assert_array_equal(
        bridge.compressed_imgmsg_to_cv2(bridge.cv2_to_compressed_imgmsg(gray16, "png")), gray16
    )
    jpg = bridge.cv2_to_compressed_imgmsg(bgr)
    assert jpg.format == "jpg" and bytes(jpg.data[:2]) == b"\xff\xd8"
    decoded = bridge.compressed_imgmsg_to_cv2(jpg)
    assert decoded.shape == bgr.shape and decoded.dtype == np.uint8
    assert np.abs(decoded.astype(int) - bgr).mean() < 3.0  # lossy, but a smooth ramp survives well
    with pytest.raises(CvBridgeError):
        bridge.compressed_imgmsg_to_cv2(CompressedImage(format="jpeg", data=b"not an image"))


def test_image_msg_to_rgb_for_every_camera_message_kind():
    bridge = CvBridge()
    rgb = random_image(np.uint8, 3, seed=5)
    np.testing.assert_array_equal(image_msg_to_rgb(hand_message(rgb, "rgb8", pad_bytes=5)), rgb)
    np.testing.assert_array_equal(image_msg_to_rgb(hand_message(rgb[..., ::-1].copy(), "bgr8")), rgb)
    gray = random_image(np.uint8, 1, seed=6)
    np.testing.assert_array_equal(image_msg_to_rgb(hand_message(gray, "mono8")), np.repeat(gray[..., None], 3, 2))
    bgr = smooth_bgr()
    out = image_msg_to_rgb(bridge.cv2_to_compressed_imgmsg(bgr, "png"))
    assert out.shape == (48, 64, 3) and out.dtype == np.uint8
    np.testing.assert_array_equal(out, bgr[..., ::-1])
    np.testing.assert_array_equal(
        image_msg_to_rgb(bridge.cv2_to_compressed_imgmsg(gray, "png")), np.repeat(gray[..., None], 3, 2)
    )
    with pytest.raises(CvBridgeError, match="not a colour image"):
        image_msg_to_rgb(hand_message(random_image(np.float32, 1), "32FC1"))
    with pytest.raises(CvBridgeError, match="CompressedImage"):
        image_msg_to_rgb(bridge.cv2_to_compressed_imgmsg(random_image(np.uint16, 1), "png"))
