"""Leader arms: where the leader's joints come from. ROS-free (the topic leader's subscription is the bridge's).

Two kinds (``para-teleop --leader``), registered in :data:`LEADERS`:

* ``topic``: ``sensor_msgs/JointState`` on ``/leader/joint_states`` (``--leader-topic``) from any leader: a GELLO, a
  SpaceMouse node that integrates to joints, a keyboard for tests, the simulator's scripted leader. A message is
  read by :func:`leader_joints`: by name when it names its joints, else by position;
* ``i2rt``: the I2RT SDK's leader arm, a YAM with the teaching handle (``get_yam_robot(channel,
  gripper_type=YAM_TEACHING_HANDLE)``, gravity compensated so the hand moves it), read by :class:`SdkLeader`. The
  handle's trigger is its passive encoder (``PassiveEncoderInfo.position``), mapped to the gripper as ``1 -
  position`` (0 closed .. 1 open, as LeRobot's YAM leader server maps it; check it on your handle).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LEADER_TOPIC = "/leader/joint_states"


class LeaderNotFound(RuntimeError):
    """The leader could not be opened (its error named, and what to check)."""


class LeaderMismatch(ValueError):
    """The leader's joints do not match the follower's (count or names)."""


@dataclass(frozen=True)
class LeaderKind:
    name: str
    description: str


LEADERS = {
    k.name: k
    for k in (
        LeaderKind("topic", f"sensor_msgs/JointState on {LEADER_TOPIC} (any leader: GELLO, SpaceMouse node, scripts)"),
        LeaderKind("i2rt", "the I2RT SDK's leader arm: a YAM with the teaching handle on its own CAN bus"),
    )
}


def leader_kind(name: str) -> LeaderKind:
    """The leader kind ``name``; ValueError listing the kinds."""
    try:
        return LEADERS[name]
    except KeyError:
        raise ValueError(f"leader {name!r} is not known; use one of {', '.join(LEADERS)}") from None


def leader_joints(
    names, positions, arm_joint_names: tuple[str, ...], gripper_name: str = "gripper"
) -> tuple[np.ndarray, float]:
    """(arm joints (n,) rad in ``arm_joint_names``' order, gripper 0..1 or NaN) of one leader ``JointState``.

    Named joints: the names other than ``gripper_name`` must be exactly ``arm_joint_names`` (in any order); no names:
    n positions, or n + 1 with the gripper last.

    :raises LeaderMismatch: another joint count or other names (the message says which and how to fix it).
    """
    names = [str(n) for n in names]
    q = np.asarray(list(positions), dtype=float)  # (m,)
    n = len(arm_joint_names)
    if names:
        if len(names) != len(q):
            raise LeaderMismatch(f"leader JointState has {len(names)} names but {len(q)} positions")
        arm = [x for x in names if x != gripper_name]
        if len(arm) != n or set(arm) != set(arm_joint_names):
            raise LeaderMismatch(
                f"the leader has {len(arm)} arm joints {arm}, the follower {n} {list(arm_joint_names)}: a leader must "
                f"name the follower's joints (plus '{gripper_name}' for the gripper); map a leader of another arm "
                "onto these joints, or pass --leader-joint-names"
            )
        index = {x: i for i, x in enumerate(names)}
        arm_q = np.array([q[index[x]] for x in arm_joint_names])  # (n,)
        gripper = float(q[index[gripper_name]]) if gripper_name in index else float("nan")
    else:
        if len(q) not in (n, n + 1):
            raise LeaderMismatch(
                f"the leader sends {len(q)} positions and no names, the follower has {n} joints: send {n} (or "
                f"{n + 1} with the gripper last), or name the joints"
            )
        arm_q, gripper = q[:n].copy(), (float(q[n]) if len(q) == n + 1 else float("nan"))
    if not np.all(np.isfinite(arm_q)):
        raise LeaderMismatch(f"the leader's joints are not finite: {arm_q.tolist()}")
    return arm_q, gripper


class SdkLeader:
    """The I2RT SDK's leader arm (module docstring).

    :param channel: the leader's CAN interface (the follower has its own, e.g. can0 and can1).
    :param arm_type: the i2rt ArmType name of the leader's arm.
    :param n_arm_joints: the follower's joint count; the leader must have as many.
    :param robot: an SDK robot already built (tests: the SDK's SimRobot); the other arguments are then ignored.
    :raises LeaderNotFound: the SDK could not open the leader (its error named, and what to check).
    :raises LeaderMismatch: the leader has another joint count than the follower.
    """

    def __init__(self, channel: str = "can1", arm_type: str = "yam", n_arm_joints: int = 6, robot=None, sim=False):
        self.channel = channel
        if robot is None:
            from i2rt.robots.get_robot import get_yam_robot  # the I2RT SDK: loaded only for this leader
            from i2rt.robots.utils import ArmType, GripperType

            try:
                robot = get_yam_robot(
                    channel=channel,
                    arm_type=ArmType.from_string_name(arm_type),
                    gripper_type=GripperType.YAM_TEACHING_HANDLE,
                    zero_gravity_mode=True,  # the hand moves the leader; it only compensates gravity
                    sim=sim,
                )
            except (OSError, RuntimeError, ValueError) as exc:
                raise LeaderNotFound(
                    f"no leader found on CAN interface {channel!r}: the I2RT SDK said: {type(exc).__name__}: {exc}. "
                    f"Check that the leader arm is powered, that its CAN adapter is plugged in and up (ip link show "
                    f"{channel}; sudo ip link set {channel} up type can bitrate 1000000), and that --leader-channel "
                    "names the leader's interface, not the follower's"
                ) from exc
        self.robot = robot
        n = int(robot.num_dofs())
        if n != n_arm_joints:
            self.close()
            raise LeaderMismatch(
                f"the leader on {channel!r} has {n} joints, the follower {n_arm_joints}: use a leader of the same arm "
                "(a YAM with the teaching handle for the YAM)"
            )
        self.n = n

    def read(self) -> tuple[np.ndarray, float]:
        """(arm joints (n,) rad, gripper 0..1 from the handle's trigger, NaN when it has none)."""
        q = np.asarray(self.robot.get_joint_pos(), dtype=float)[: self.n].copy()  # (n,)
        gripper = float("nan")
        chain = getattr(self.robot, "motor_chain", None)
        states = getattr(chain, "get_same_bus_device_states", None)
        if states is not None:
            encoders = states()
            if encoders:
                gripper = float(np.clip(1.0 - float(encoders[0].position), 0.0, 1.0))
        return q, gripper

    def close(self) -> None:
        close = getattr(self.robot, "close", None)
        if close is not None:
            close()
