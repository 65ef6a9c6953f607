"""Building the ``para_msgs/ActionChunk`` of a ``para_core.policy.PolicyOutput``: the one place its fields are filled.

Used by the inference node (live) and by ``para-bag eval --write-chunks`` (offline), so a chunk written to a bag is
byte-for-byte the chunk the node would have published for the same observation.
"""
from __future__ import annotations


def action_chunk_msg(out, stamp_ns: int, world_frame: str, tool_frame: str, model_id: str):
    """ActionChunk stamped ``stamp_ns`` (the observation time) in ``world_frame``, one pose per step of ``out``.

    :param out: a ``PolicyOutput`` (positions_world (T, 3), quaternions_xyzw (T, 4), gripper, confidence,
        time_offsets_s).
    """
    from builtin_interfaces.msg import Duration
    from std_msgs.msg import Header
    from para_msgs.msg import ActionChunk

    from para_ros.adapters.transforms import make_matrix, matrix_to_pose

    header = Header(frame_id=world_frame)
    header.stamp.sec, header.stamp.nanosec = divmod(int(stamp_ns), 1_000_000_000)
    msg = ActionChunk(header=header, tool_frame_id=tool_frame, model_id=model_id)
    for offset_s, xyz, q in zip(out.time_offsets_s, out.positions_world, out.quaternions_xyzw):
        sec, nsec = divmod(int(round(float(offset_s) * 1e9)), 1_000_000_000)
        msg.time_from_stamp.append(Duration(sec=sec, nanosec=nsec))
        msg.poses.append(matrix_to_pose(make_matrix(xyz, q)))
    msg.gripper = [float(g) for g in out.gripper]
    msg.confidence = [float(c) for c in out.confidence]
    return msg
