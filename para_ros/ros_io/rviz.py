"""rviz messages for a predicted chunk: markers (argmax voxel per step, predicted path, current EE), a voxel cloud and
an overlay image.

Message construction only; the numbers come from ``para_core.model.policy.PolicyOutput``.
"""

from __future__ import annotations

import array

import numpy as np
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import Point
from sensor_msgs.msg import Image, PointCloud2, PointField
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker, MarkerArray

from para_ros.stamps import ns_to_fields

MARKER_NS_STEPS = "para_steps"
MARKER_NS_PATH = "para_path"
MARKER_NS_EE = "para_ee"


def step_color(i: int, n: int, confidence: float | None = None) -> ColorRGBA:
    """Early steps green -> late steps blue; alpha = confidence when given (at least 0.25 so it stays visible)."""
    f = i / max(n - 1, 1)
    alpha = 1.0 if confidence is None else float(np.clip(confidence, 0.25, 1.0))
    return ColorRGBA(r=0.1, g=float(1.0 - 0.7 * f), b=float(0.3 + 0.7 * f), a=alpha)


def chunk_markers(
    header: Header,
    positions_world: np.ndarray,
    confidence: np.ndarray,
    ee_position_world: np.ndarray,
    voxel_size_m: float = 0.01,
    lifetime_s: float = 1.0,
    color_by: str = "step",
) -> MarkerArray:
    """Markers in ``header.frame_id``: one sphere per step at its decoded position, the path, and the current EE.

    :param positions_world: (T, 3) decoded step positions, metres.
    :param confidence: (T,) per-step confidence in [0, 1].
    :param color_by: ``"step"`` (green -> blue with alpha = confidence) or ``"confidence"`` (red 0 -> green 1).
    """
    T = len(positions_world)
    lifetime = _duration(lifetime_s)
    steps = Marker(
        header=header, ns=MARKER_NS_STEPS, id=0, type=Marker.SPHERE_LIST, action=Marker.ADD, lifetime=lifetime
    )
    steps.pose.orientation.w = 1.0
    steps.scale.x = steps.scale.y = steps.scale.z = float(voxel_size_m)
    for i, p in enumerate(positions_world):
        steps.points.append(Point(x=float(p[0]), y=float(p[1]), z=float(p[2])))
        if color_by == "confidence":
            c = float(np.clip(confidence[i], 0, 1))
            steps.colors.append(ColorRGBA(r=1.0 - c, g=c, b=0.1, a=1.0))
        else:
            steps.colors.append(step_color(i, T, float(confidence[i])))
    path = Marker(header=header, ns=MARKER_NS_PATH, id=0, type=Marker.LINE_STRIP, action=Marker.ADD, lifetime=lifetime)
    path.pose.orientation.w = 1.0
    path.scale.x = float(voxel_size_m) * 0.3
    path.color = ColorRGBA(r=1.0, g=0.8, b=0.1, a=0.9)
    path.points = [Point(x=float(ee_position_world[0]), y=float(ee_position_world[1]), z=float(ee_position_world[2]))]
    path.points += list(steps.points)
    ee = Marker(header=header, ns=MARKER_NS_EE, id=0, type=Marker.SPHERE, action=Marker.ADD, lifetime=lifetime)
    ee.pose.position = Point(
        x=float(ee_position_world[0]), y=float(ee_position_world[1]), z=float(ee_position_world[2])
    )
    ee.pose.orientation.w = 1.0
    ee.scale.x = ee.scale.y = ee.scale.z = float(voxel_size_m) * 1.5
    ee.color = ColorRGBA(r=1.0, g=0.2, b=0.2, a=1.0)
    return MarkerArray(markers=[steps, path, ee])


def voxel_cloud(header: Header, points_world: np.ndarray, probability: np.ndarray) -> PointCloud2:
    """``PointCloud2`` with fields x, y, z, probability (float32), one point per voxel (unordered: height 1)."""
    points_world = np.asarray(points_world, dtype=np.float32).reshape(-1, 3)
    probability = np.asarray(probability, dtype=np.float32).reshape(-1)
    data = np.empty(len(points_world), dtype=[("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("probability", "<f4")])
    data["x"], data["y"], data["z"] = points_world.T
    data["probability"] = probability
    fields = [
        PointField(name=n, offset=4 * i, datatype=PointField.FLOAT32, count=1)
        for i, n in enumerate(("x", "y", "z", "probability"))
    ]
    return PointCloud2(
        header=header,
        height=1,
        width=len(data),
        fields=fields,
        is_bigendian=False,
        point_step=16,
        row_step=16 * len(data),
        data=data.tobytes(),
        is_dense=True,
    )


def rgb_image(stamp, frame_id: str, rgb: np.ndarray) -> Image:
    """An rgb8 ``sensor_msgs/Image`` of ``rgb`` ((H, W, 3) uint8) stamped ``stamp`` in ``frame_id``."""
    img = Image()
    img.header.stamp = stamp
    img.header.frame_id = frame_id
    img.height, img.width = rgb.shape[:2]
    img.encoding, img.is_bigendian, img.step = "rgb8", 0, 3 * rgb.shape[1]
    img.data = array.array("B", np.ascontiguousarray(rgb).tobytes())
    return img


def cloud_to_array(msg: PointCloud2) -> np.ndarray:
    """Inverse of :func:`voxel_cloud`: (N, 4) float32 [x, y, z, probability] (for tests and tools)."""
    return np.frombuffer(bytes(msg.data), dtype="<f4").reshape(-1, 4)


def _duration(seconds: float):
    ns = int(round(seconds * 1e9))
    sec, nanosec = ns_to_fields(ns)
    return Duration(sec=sec, nanosec=nanosec)
