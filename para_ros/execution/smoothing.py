"""Optional jerk-limited smoothing of the joint targets with ruckig (online trajectory generation).

Each control tick, ruckig plans from the current smoothed state (position, velocity, acceleration) to the new IK
target, moving at the target's own velocity (finite difference of successive targets, clipped to the velocity
limit), under per-joint velocity, acceleration and jerk limits, and the first ``dt`` of that plan is the output.
The result lags a moving target a little but has bounded jerk. The safety filter still runs after it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class JerkLimits:
    """Limits of the smoother: rad/s, rad/s^2, rad/s^3, each a scalar (every joint) or one value per joint."""

    max_velocity: np.ndarray
    max_acceleration: np.ndarray
    max_jerk: np.ndarray

    def __post_init__(self):
        for name in ("max_velocity", "max_acceleration", "max_jerk"):
            arr = np.asarray(getattr(self, name), dtype=float).reshape(-1)
            if arr.size == 0 or not np.all(np.isfinite(arr) & (arr > 0)):
                raise ValueError(f"JerkLimits.{name}={getattr(self, name)!r}: need finite values > 0")
            setattr(self, name, arr)

    def per_joint(self, n_joints: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(velocity, acceleration, jerk), each (n_joints,); :class:`ValueError` when a per-joint list has another
        length."""
        out = []
        for name in ("max_velocity", "max_acceleration", "max_jerk"):
            arr = getattr(self, name)
            if arr.size not in (1, n_joints):
                raise ValueError(f"JerkLimits.{name} has {arr.size} values for an arm of {n_joints} joints")
            out.append(np.broadcast_to(arr, (n_joints,)).copy())
        return out[0], out[1], out[2]


class JerkLimitedSmoother:
    """Online jerk-limited tracking of a stream of (n,) joint targets at a fixed period ``dt_s``.

    :param n_joints: the arm's joint count (its description's).
    """

    def __init__(self, limits: JerkLimits, dt_s: float, n_joints: int):
        from ruckig import InputParameter, OutputParameter, Ruckig  # ruckig: loaded on first use, not on import

        if not dt_s > 0:
            raise ValueError(f"JerkLimitedSmoother dt_s={dt_s!r}: must be > 0")
        self.limits = limits
        self.dt_s = dt_s
        self.n_joints = int(n_joints)
        self._max_velocity, max_acceleration, max_jerk = limits.per_joint(self.n_joints)  # (n,) each
        self._otg = Ruckig(self.n_joints, dt_s)
        self._inp = InputParameter(self.n_joints)
        self._out = OutputParameter(self.n_joints)
        self._inp.max_velocity = self._max_velocity.tolist()
        self._inp.max_acceleration = max_acceleration.tolist()
        self._inp.max_jerk = max_jerk.tolist()
        self._last_target: np.ndarray | None = None
        self._initialised = False

    def reset(self, q_rad: np.ndarray) -> None:
        """Start at rest at ``q_rad`` (n,) (after a hold, stop or the first joint state)."""
        self._inp.current_position = np.asarray(q_rad, dtype=float).tolist()
        self._inp.current_velocity = [0.0] * self.n_joints
        self._inp.current_acceleration = [0.0] * self.n_joints
        self._last_target = None
        self._initialised = True

    def step(self, q_target_rad: np.ndarray) -> np.ndarray:
        """The next smoothed (n,) joint position towards ``q_target_rad``."""
        from ruckig import Result  # ruckig: loaded on first use, not on import

        if not self._initialised:
            self.reset(q_target_rad)
        target = np.asarray(q_target_rad, dtype=float)
        vel = np.zeros(self.n_joints) if self._last_target is None else (target - self._last_target) / self.dt_s
        vel = np.clip(vel, -self._max_velocity, self._max_velocity)
        self._last_target = target
        self._inp.target_position = target.tolist()
        self._inp.target_velocity = vel.tolist()
        self._inp.target_acceleration = [0.0] * self.n_joints
        result = self._otg.update(self._inp, self._out)
        if result not in (Result.Working, Result.Finished):
            # infeasible with a moving target: fall back to stopping at the target
            self._inp.target_velocity = [0.0] * self.n_joints
            result = self._otg.update(self._inp, self._out)
            if result not in (Result.Working, Result.Finished):
                return np.asarray(self._inp.current_position, dtype=float)
        self._out.pass_to_input(self._inp)
        return np.asarray(self._out.new_position, dtype=float)
