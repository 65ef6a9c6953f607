"""ActionChunk <-> numpy (para_ros.ros_io.chunk_msg) against a message filled by hand, field by field."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

pytestmark = pytest.mark.ros  # rclpy messages and serialisation, no DDS traffic


def hand_made_chunk_msg(stamp_ns, frame, tool, model_id, dts, positions, quats, gripper, confidence):
    """The reference: every field set one at a time, in the .msg's words."""
    from builtin_interfaces.msg import Duration
    from geometry_msgs.msg import Pose

    from para_msgs.msg import ActionChunk

    msg = ActionChunk()
    msg.header.stamp.sec, msg.header.stamp.nanosec = stamp_ns // 10**9, stamp_ns % 10**9
    msg.header.frame_id, msg.tool_frame_id, msg.model_id = frame, tool, model_id
    for dt_ns in dts:
        d = Duration()
        d.sec, d.nanosec = dt_ns // 10**9, dt_ns % 10**9
        msg.time_from_stamp.append(d)
    for p, q in zip(positions, quats):
        pose = Pose()
        pose.position.x, pose.position.y, pose.position.z = float(p[0]), float(p[1]), float(p[2])
        pose.orientation.x, pose.orientation.y = float(q[0]), float(q[1])
        pose.orientation.z, pose.orientation.w = float(q[2]), float(q[3])
        msg.poses.append(pose)
    msg.gripper = [float(g) for g in gripper]
    msg.confidence = [float(c) for c in confidence]
    return msg


def test_action_chunk_msg_is_the_hand_made_message_and_round_trips():
    from rclpy.serialization import deserialize_message, serialize_message

    from para_msgs.msg import ActionChunk
    from para_ros.ros_io.chunk_msg import action_chunk_msg, chunk_from_msg

    rng = np.random.default_rng(3)
    T = 5
    q = rng.normal(size=(T, 4))
    q[0] = [0.0, 0.0, 0.6, -0.8]  # w < 0: sent as the same rotation with w >= 0
    q_sent = 3.0 * q  # not unit: sent as unit
    unit = np.where(q_sent[:, 3:] < 0, -q_sent, q_sent) / np.linalg.norm(q_sent, axis=1, keepdims=True)
    out = SimpleNamespace(
        time_offsets_s=np.array([0.0, 0.1, 0.2, 1.3, 2.000000001]),
        positions_world=rng.normal(size=(T, 3)),
        quaternions_xyzw=q_sent,
        gripper=rng.uniform(size=T),
        confidence=rng.uniform(size=T),
    )
    stamp_ns = 1_234_567_890_123
    msg = action_chunk_msg(out, stamp_ns, "base", "grasp_site", "para_v4@test")
    expected = hand_made_chunk_msg(
        stamp_ns,
        "base",
        "grasp_site",
        "para_v4@test",
        [0, 100_000_000, 200_000_000, 1_300_000_000, 2_000_000_001],
        out.positions_world,
        unit,
        out.gripper,
        out.confidence,
    )
    # Field by field (the generated __eq__), and through the wire format: CDR padding bytes are not zeroed by the
    # serialiser, so two serialisations of one message can differ in them and bytes are no reference.
    assert msg == expected
    assert deserialize_message(serialize_message(msg), ActionChunk) == expected
    back = chunk_from_msg(msg)
    np.testing.assert_allclose(back.positions_m, out.positions_world)
    np.testing.assert_allclose(back.quats_xyzw, unit, atol=1e-15)
    np.testing.assert_allclose(back.time_from_stamp_s, out.time_offsets_s, atol=1e-9)
    np.testing.assert_allclose(back.gripper, out.gripper, rtol=1e-6)  # float32 on the wire
    assert (back.frame_id, back.tool_frame_id, back.model_id) == ("base", "grasp_site", "para_v4@test")


def test_odd_content_is_copied_not_refused():
    """Conversion never judges (validate_chunk does): NaN and arrays of different lengths go through as they are."""
    from para_ros.execution.chunk import Chunk
    from para_ros.ros_io.chunk_msg import chunk_from_msg, chunk_to_msg

    chunk = Chunk(
        stamp_s=1.5,
        time_from_stamp_s=np.array([0.0, 0.1, 0.2]),
        positions_m=np.array([[np.nan, 0, 0]]),
        quats_xyzw=np.array([[0, 0, 0, 1.0], [0, 0, 0, 1.0]]),
        gripper=np.array([0.5, 0.5]),
        confidence=np.array([]),
        frame_id="base",
        tool_frame_id="tool",
        model_id="m",
    )
    back = chunk_from_msg(chunk_to_msg(chunk))
    assert back.stamp_s == 1.5 and len(back.time_from_stamp_s) == 3 and len(back.gripper) == 2
    assert back.positions_m.shape == (1, 3) and np.isnan(back.positions_m[0, 0])  # zip: one pose of the shorter
    assert back.confidence.shape == (0,)


def test_refilled_message_is_the_fresh_message_whatever_it_held():
    """``into=``: a message refilled in place equals a fresh one, after chunks that were longer, shorter, or had other
    frames; a refill that kept stale poses, durations or scalars from the chunk before would differ."""
    from para_msgs.msg import ActionChunk
    from para_ros.ros_io.chunk_msg import action_chunk_msg

    rng = np.random.default_rng(7)
    reused = ActionChunk()
    for T, frame, model_id in ((8, "base", "a"), (3, "world", "b"), (11, "base", "c"), (0, "base", "d"), (5, "w", "")):
        out = SimpleNamespace(
            time_offsets_s=np.arange(T) * 0.1 + rng.uniform(),
            positions_world=rng.normal(size=(T, 3)),
            quaternions_xyzw=rng.normal(size=(T, 4)),
            gripper=rng.uniform(size=T),
            confidence=rng.uniform(size=T),
        )
        stamp_ns = int(rng.integers(0, 2**40))
        fresh = action_chunk_msg(out, stamp_ns, frame, "tool", model_id)
        refilled = action_chunk_msg(out, stamp_ns, frame, "tool", model_id, into=reused)
        assert refilled is reused
        assert len(refilled.poses) == len(refilled.time_from_stamp) == T
        assert refilled == fresh
