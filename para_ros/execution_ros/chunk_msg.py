"""``para_msgs/ActionChunk`` <-> :class:`para_ros.execution.chunk.Chunk` (numbers only; validation is elsewhere).

Conversion never raises on odd content (NaN, mismatched lengths...): it copies what is there, and
:func:`para_ros.execution.chunk.validate_chunk` decides. Times become float seconds (``sec + nanosec * 1e-9``).
"""
from __future__ import annotations

import numpy as np

from para_ros.execution.chunk import Chunk


def time_to_s(t) -> float:
    """``builtin_interfaces/Time`` or ``Duration`` -> float seconds."""
    return float(t.sec) + float(t.nanosec) * 1e-9


def s_to_time_fields(t_s: float) -> tuple[int, int]:
    """Float seconds -> (sec, nanosec) with 0 <= nanosec < 1e9."""
    total_ns = int(round(t_s * 1e9))
    return total_ns // 1_000_000_000, total_ns % 1_000_000_000


def chunk_from_msg(msg) -> Chunk:
    """Copy an ActionChunk message into numpy arrays (shapes may disagree; validation checks)."""
    poses = msg.poses
    positions = np.array([[p.position.x, p.position.y, p.position.z] for p in poses], dtype=float).reshape(-1, 3)
    quats = np.array([[p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w] for p in poses],
                     dtype=float).reshape(-1, 4)
    return Chunk(
        stamp_s=time_to_s(msg.header.stamp),
        time_from_stamp_s=np.array([time_to_s(d) for d in msg.time_from_stamp], dtype=float),
        positions_m=positions,
        quats_xyzw=quats,
        gripper=np.asarray(msg.gripper, dtype=float).reshape(-1),
        confidence=np.asarray(msg.confidence, dtype=float).reshape(-1),
        frame_id=msg.header.frame_id,
        tool_frame_id=msg.tool_frame_id,
        model_id=msg.model_id,
    )


def chunk_to_msg(chunk: Chunk):
    """Build an ActionChunk message from numpy arrays (tests, tools)."""
    from builtin_interfaces.msg import Duration
    from geometry_msgs.msg import Pose
    from para_msgs.msg import ActionChunk

    msg = ActionChunk()
    msg.header.stamp.sec, msg.header.stamp.nanosec = s_to_time_fields(chunk.stamp_s)
    msg.header.frame_id = chunk.frame_id
    msg.tool_frame_id = chunk.tool_frame_id
    msg.model_id = chunk.model_id
    for dt in chunk.time_from_stamp_s:
        d = Duration()
        d.sec, d.nanosec = s_to_time_fields(float(dt))
        msg.time_from_stamp.append(d)
    for p, q in zip(chunk.positions_m, chunk.quats_xyzw):
        pose = Pose()
        pose.position.x, pose.position.y, pose.position.z = (float(v) for v in p)
        pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w = (float(v) for v in q)
        msg.poses.append(pose)
    msg.gripper = [float(g) for g in chunk.gripper]
    msg.confidence = [float(c) for c in chunk.confidence]
    return msg
