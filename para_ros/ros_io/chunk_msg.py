"""``para_msgs/ActionChunk`` in and out: the one place its fields are read and filled.

* :func:`action_chunk_msg`: a ``para_core`` ``PolicyOutput`` -> ActionChunk, used by the inference node (live) and by
  ``para-bag eval --write-chunks`` (offline), so a chunk written to a bag is field for field the chunk the node would
  have published for the same observation;
* :func:`chunk_from_msg` / :func:`chunk_to_msg`: ActionChunk <-> :class:`para_ros.execution.chunk.Chunk` (numbers
  only; validation is elsewhere).

Conversion never raises on odd content (NaN, mismatched lengths...): it copies what is there, and
:func:`para_ros.execution.chunk.validate_chunk` decides. Times become float seconds (``sec + nanosec * 1e-9``).
"""

from __future__ import annotations

import numpy as np

from para_core.model.rotations import unit_quaternions
from para_ros.execution.chunk import MEASURE_FIELDS, Chunk
from para_ros.stamps import s_to_fields, set_stamp, stamp_to_s


def poses_to_arrays(poses) -> tuple[np.ndarray, np.ndarray]:
    """``geometry_msgs/Pose`` list -> positions (N, 3) and quaternions (N, 4) x, y, z, w."""
    positions = np.array([[p.position.x, p.position.y, p.position.z] for p in poses], dtype=float).reshape(-1, 3)
    quats = np.array(
        [[p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w] for p in poses], dtype=float
    ).reshape(-1, 4)
    return positions, quats


def chunk_from_msg(msg) -> Chunk:
    """Copy an ActionChunk message into numpy arrays (shapes may disagree; validation checks)."""
    positions, quats = poses_to_arrays(msg.poses)
    return Chunk(
        stamp_s=stamp_to_s(msg.header.stamp),
        time_from_stamp_s=np.array([stamp_to_s(d) for d in msg.time_from_stamp], dtype=float),
        positions_m=positions,
        quats_xyzw=quats,
        gripper=np.asarray(msg.gripper, dtype=float).reshape(-1),
        confidence=np.asarray(msg.confidence, dtype=float).reshape(-1),
        frame_id=msg.header.frame_id,
        tool_frame_id=msg.tool_frame_id,
        model_id=msg.model_id,
        **{name: np.asarray(getattr(msg, name), dtype=float).reshape(-1) for name in MEASURE_FIELDS},
    )


def chunk_to_msg(chunk: Chunk, stamp_ns: int | None = None, into=None):
    """Build an ActionChunk message from numpy arrays; ``stamp_ns`` (exact nanoseconds) replaces ``chunk.stamp_s``.

    ``into``: an ActionChunk to fill in place instead of a new one; its pose and duration messages are reused (a
    publisher that sends one chunk after another spares the constructors of T poses; docs/benchmarks.md). The
    result is the message a fresh one would be, whatever ``into`` held before; rclpy serialises at ``publish``, so
    refilling a published message is safe.
    """
    from builtin_interfaces.msg import Duration  # rclpy: loaded on first use, not on import
    from geometry_msgs.msg import Pose

    from para_msgs.msg import ActionChunk

    msg = ActionChunk() if into is None else into
    if stamp_ns is None:
        msg.header.stamp.sec, msg.header.stamp.nanosec = s_to_fields(chunk.stamp_s)
    else:
        set_stamp(msg.header.stamp, stamp_ns)
    msg.header.frame_id = chunk.frame_id
    msg.tool_frame_id = chunk.tool_frame_id
    msg.model_id = chunk.model_id
    offsets_s = np.asarray(chunk.time_from_stamp_s, dtype=float).reshape(-1).tolist()
    durations = _resized(msg.time_from_stamp, len(offsets_s), Duration)
    for duration, dt_s in zip(durations, offsets_s):
        duration.sec, duration.nanosec = s_to_fields(dt_s)
    msg.time_from_stamp = durations
    positions = np.asarray(chunk.positions_m, dtype=float).reshape(-1, 3).tolist()
    quats = np.asarray(chunk.quats_xyzw, dtype=float).reshape(-1, 4).tolist()
    poses = _resized(msg.poses, min(len(positions), len(quats)), Pose)
    for pose, (x, y, z), (qx, qy, qz, qw) in zip(poses, positions, quats):
        position, orientation = pose.position, pose.orientation  # field by field: rclpy's cheapest setters
        position.x, position.y, position.z = x, y, z
        orientation.x, orientation.y, orientation.z, orientation.w = qx, qy, qz, qw
    msg.poses = poses
    msg.gripper = np.asarray(chunk.gripper, dtype=float).reshape(-1).tolist()
    msg.confidence = np.asarray(chunk.confidence, dtype=float).reshape(-1).tolist()
    for name in MEASURE_FIELDS:
        setattr(msg, name, np.asarray(getattr(chunk, name), dtype=float).reshape(-1).tolist())
    return msg


def _resized(items, n: int, make) -> list:
    """The first ``n`` of ``items``, padded with ``make()`` to ``n``: the nested messages of a message refilled."""
    kept = list(items[:n])
    kept.extend(make() for _ in range(n - len(kept)))
    return kept


def action_chunk_msg(out, stamp_ns: int, world_frame: str, tool_frame: str, model_id: str, into=None):
    """ActionChunk stamped ``stamp_ns`` (the observation time) in ``world_frame``, one pose per step of ``out``;
    ``into``: a message to refill in place (:func:`chunk_to_msg`).

    :param out: a ``PolicyOutput`` (positions_world (T, 3), quaternions_xyzw (T, 4), gripper, confidence,
        time_offsets_s, and the other confidence measures when it has them: entropy, chunk_agreement,
        view_agreement).
    """

    return chunk_to_msg(
        Chunk(
            stamp_s=0.0,
            time_from_stamp_s=np.asarray(out.time_offsets_s, dtype=float),
            positions_m=np.asarray(out.positions_world, dtype=float).reshape(-1, 3),
            quats_xyzw=unit_quaternions(out.quaternions_xyzw),  # unit, w >= 0: as TF would give
            gripper=np.asarray(out.gripper, dtype=float),
            confidence=np.asarray(out.confidence, dtype=float),
            frame_id=world_frame,
            tool_frame_id=tool_frame,
            model_id=model_id,
            **{name: np.asarray(getattr(out, name, ()), dtype=float).reshape(-1) for name in MEASURE_FIELDS},
        ),
        stamp_ns=stamp_ns,
        into=into,
    )
