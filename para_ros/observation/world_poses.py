"""Poses in the policy's world frame at an image's stamp: a camera's, the end effector's.

The observation builder asks for ``T_world_frame`` at a stamp; this answers from a TF-like look-up (injected, so the
rules are testable without ROS) and, for the end effector with ``ee_source: joint_states``, from the joint-state
history and the arm's forward kinematics (times the arm base's pose in the world when the base is not the world).
Every failure is an ``ObservationProblem`` whose message names the frames, the stamp and what was missing.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from para_ros.observation.builder import ObservationProblem, matrix_is_finite
from para_ros.observation.ee_from_joints import EeFromJoints


class PoseLookupError(LookupError):
    """What a look-up function raises when it has no transform (its message says why, e.g. the TF exception)."""


# lookup(target_frame, source_frame, stamp_ns, timeout_ns) -> (4, 4) T_target_source; raises PoseLookupError
PoseLookup = Callable[[str, str, int, int], np.ndarray]


class WorldPoses:
    """``T_world_frame`` and ``T_world_ee`` at a stamp (see the module docstring).

    :param lookup: the transform look-up (the inference node's TF buffer).
    :param world_frame: the policy's world frame (the chunk's frame).
    :param ee_frame: the tool frame looked up in TF when ``ee_from_joints`` is None.
    :param tf_timeout_s: how long a look-up may wait for data (s); change it on the instance (a dynamic parameter).
    :param ee_from_joints: the joint-state history and forward kinematics for ``ee_source: joint_states``.
    :param joint_states_topic: named in the error when the joint states do not cover a stamp.
    :param rejections: the look-up's refused transforms by child frame (named in a TF error), or None.
    """

    def __init__(
        self,
        lookup: PoseLookup,
        world_frame: str,
        ee_frame: str,
        tf_timeout_s: float,
        ee_from_joints: EeFromJoints | None = None,
        joint_states_topic: str = "/joint_states",
        rejections: Callable[[], dict] | None = None,
    ):
        self._lookup = lookup
        self.world_frame = world_frame
        self.ee_frame = ee_frame
        self.tf_timeout_s = float(tf_timeout_s)
        self.ee_from_joints = ee_from_joints
        self.joint_states_topic = joint_states_topic
        self._rejections = rejections or dict

    def frame_pose(self, frame: str, stamp_ns: int, wait: bool = True, what: str | None = None) -> np.ndarray:
        """(4, 4) ``T_world_frame`` at ``stamp_ns``, waiting up to ``tf_timeout_s`` when ``wait``; raises
        ``ObservationProblem`` (``tf``), its message prefixed with ``what`` when given."""
        world = self.world_frame
        prefix = f"{what}: " if what else ""
        try:
            timeout_ns = int(self.tf_timeout_s * 1e9) if wait else 0
            T_world_frame = self._lookup(world, frame, stamp_ns, timeout_ns)  # (4, 4)
        except PoseLookupError as exc:
            detail = "; ".join(f"refused {child}: {why}" for child, why in self._rejections().items())
            raise ObservationProblem(
                "tf",
                f"{prefix}no TF {world} <- {frame} at t={stamp_ns / 1e9:.3f} s ({exc}){'; ' + detail if detail else ''}",
            ) from None
        return matrix_is_finite(T_world_frame, f"{prefix}TF {world} <- {frame}")

    def ee_pose(self, stamp_ns: int, wait: bool = True) -> np.ndarray:
        """(4, 4) ``T_world_ee`` at ``stamp_ns`` from TF or the joint states; raises ``ObservationProblem``."""
        if self.ee_from_joints is None:
            return self.frame_pose(self.ee_frame, stamp_ns, wait, what="end-effector pose")
        T_base_ee = self.ee_from_joints.pose_at(stamp_ns)  # (4, 4)
        if T_base_ee is None:
            span = self.ee_from_joints.history.span_s()
            have = f"joint states cover {span[0]:.3f} .. {span[1]:.3f} s" if span else "no joint states yet"
            raise ObservationProblem(
                "joint_states",
                f"end-effector pose: no {self.joint_states_topic} "
                f"brackets t={stamp_ns / 1e9:.3f} s ({have}; arm joints "
                f"{list(self.ee_from_joints.history.joint_names)})",
            )
        base = self.ee_from_joints.base_frame
        if base == self.world_frame:
            return T_base_ee
        return self.frame_pose(base, stamp_ns, wait, what="arm base pose") @ T_base_ee
