"""The end-effector pose from ``/joint_states`` + forward kinematics: the inference node's ``ee_source: joint_states``.

For arms whose driver publishes joint states but no tool frame in TF. Joint states are kept for ``history_s`` and
interpolated linearly between the two that bracket a requested stamp (the same rule TF uses for transforms), then put
through the YAM's forward kinematics (the I2RT SDK model, ``config/yam.yaml``). A stamp outside the kept states is not
extrapolated: the caller gets None and reports it, exactly like a TF extrapolation error.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Sequence

import numpy as np

from para_ros.robot.arm_kinematics import ArmKinematics
from para_ros.robot.yam import load_yam_config


class JointStateHistory:
    """Recent arm joint positions by stamp (ns), interpolated on request. Thread-safe."""

    def __init__(self, joint_names: Sequence[str], history_s: float = 10.0):
        if not history_s > 0:
            raise ValueError(f"history_s={history_s}: must be > 0")
        self.joint_names = tuple(joint_names)
        self.history_ns = int(history_s * 1e9)
        self._stamps: list[int] = []
        self._positions: list[np.ndarray] = []
        self._lock = threading.Lock()

    def add(self, stamp_ns: int, names: Sequence[str], positions: Sequence[float]) -> bool:
        """Store one JointState; False (ignored) when it lacks an arm joint, holds non-finite values, or is older
        than the newest kept state."""
        index = {n: i for i, n in enumerate(names)}
        if any(n not in index or index[n] >= len(positions) for n in self.joint_names):
            return False
        q = np.array([positions[index[n]] for n in self.joint_names], dtype=np.float64)
        if not np.all(np.isfinite(q)):
            return False
        with self._lock:
            if self._stamps and stamp_ns <= self._stamps[-1]:
                return False
            self._stamps.append(int(stamp_ns))
            self._positions.append(q)
            while self._stamps and self._stamps[0] < stamp_ns - self.history_ns:
                self._stamps.pop(0)
                self._positions.pop(0)
        return True

    def at(self, stamp_ns: int) -> np.ndarray | None:
        """(n,) joint positions at ``stamp_ns`` (linear between the bracketing states), None outside the history."""
        with self._lock:
            if not self._stamps or stamp_ns < self._stamps[0] or stamp_ns > self._stamps[-1]:
                return None
            i = bisect.bisect_left(self._stamps, stamp_ns)
            if self._stamps[i] == stamp_ns:
                return self._positions[i].copy()
            t0, t1 = self._stamps[i - 1], self._stamps[i]
            f = (stamp_ns - t0) / (t1 - t0)
            return (1.0 - f) * self._positions[i - 1] + f * self._positions[i]

    def span_s(self) -> tuple[float, float] | None:
        with self._lock:
            return (self._stamps[0] / 1e9, self._stamps[-1] / 1e9) if self._stamps else None


class EeFromJoints:
    """``T_base_tool`` at a stamp from a :class:`JointStateHistory` and the arm's forward kinematics (the arm
    description at ``yam_config_path``; the YAM's by default)."""

    def __init__(self, yam_config_path: str | None = None, history_s: float = 10.0):
        yam = load_yam_config(yam_config_path)
        self.base_frame = yam.model.world_frame
        self.history = JointStateHistory(yam.model.joint_names, history_s)
        self._kin = ArmKinematics(yam.model)
        self._kin_lock = threading.Lock()  # the SDK kinematics is not thread-safe

    def pose_at(self, stamp_ns: int) -> np.ndarray | None:
        """(4, 4) tool pose in the arm's base frame at ``stamp_ns``; None when no joint state brackets it."""
        q = self.history.at(stamp_ns)
        if q is None:
            return None
        with self._kin_lock:
            return self._kin.fk(q)
