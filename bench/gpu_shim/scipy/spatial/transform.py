"""``scipy.spatial.transform.Rotation`` and ``Slerp`` stand-ins: what the model's decoding, the dataset and the
synthetic episodes call, in NumPy.

Quaternions are (x, y, z, w), scalar last, as SciPy's. Single rotations (1-D input) give 1-D / (3, 3) results,
stacks (M, ...) give (M, ...) results, as SciPy's.
"""

from __future__ import annotations

import numpy as np


class Rotation:
    def __init__(self, quat_xyzw: np.ndarray, single: bool):
        self._q = quat_xyzw  # (M, 4) unit quaternions
        self._single = single

    @classmethod
    def from_quat(cls, quat) -> Rotation:
        q = np.asarray(quat, dtype=np.float64)
        single = q.ndim == 1
        q = q.reshape(-1, 4)
        return cls(q / np.linalg.norm(q, axis=1, keepdims=True), single)

    @classmethod
    def from_rotvec(cls, rotvec) -> Rotation:
        r = np.asarray(rotvec, dtype=np.float64)
        single = r.ndim == 1
        r = r.reshape(-1, 3)
        angle = np.linalg.norm(r, axis=1)  # (M,)
        small = angle < 1e-3
        # sin(a/2)/a, with its Taylor series near 0
        scale = np.where(small, 0.5 - angle**2 / 48 + angle**4 / 3840, np.sin(angle / 2) / np.where(small, 1, angle))
        q = np.concatenate([r * scale[:, None], np.cos(angle / 2)[:, None]], axis=1)
        return cls(q, single)

    @classmethod
    def from_euler(cls, seq: str, angles, degrees: bool = False) -> Rotation:
        """One axis only (``"x"``, ``"y"`` or ``"z"``, extrinsic), the only form the project uses."""
        if seq.lower() not in ("x", "y", "z") or seq != seq.lower():
            raise NotImplementedError(f"gpu_shim Rotation.from_euler: only one extrinsic axis, not {seq!r}")
        a = np.asarray(angles, dtype=np.float64)
        single = a.ndim == 0
        a = a.reshape(-1)
        if degrees:
            a = np.deg2rad(a)
        axis = np.zeros((a.shape[0], 3))
        axis[:, "xyz".index(seq)] = 1.0
        rot = cls.from_rotvec(axis * a[:, None])
        rot._single = single
        return rot

    def __len__(self) -> int:
        return self._q.shape[0]

    def __getitem__(self, index) -> Rotation:
        q = self._q[index]
        return Rotation(q.reshape(-1, 4), q.ndim == 1)

    @classmethod
    def from_matrix(cls, matrix) -> Rotation:
        R = np.asarray(matrix, dtype=np.float64)
        single = R.ndim == 2
        R = R.reshape(-1, 3, 3)
        # the largest of w, x, y, z first (numerically stable), as SciPy does
        d = np.stack([R[:, 0, 0], R[:, 1, 1], R[:, 2, 2], R[:, 0, 0] + R[:, 1, 1] + R[:, 2, 2]], axis=1)  # (M, 4)
        choice = d.argmax(axis=1)
        q = np.empty((R.shape[0], 4))
        for m, c in enumerate(choice):
            r = R[m]
            if c == 3:
                q[m] = [r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1], 1 + d[m, 3]]
            else:
                i, j, k = c, (c + 1) % 3, (c + 2) % 3
                v = np.empty(4)
                v[i] = 1 - d[m, 3] + 2 * r[i, i]
                v[j] = r[j, i] + r[i, j]
                v[k] = r[k, i] + r[i, k]
                v[3] = r[k, j] - r[j, k]
                q[m] = v
        return cls(q / np.linalg.norm(q, axis=1, keepdims=True), single)

    def as_quat(self) -> np.ndarray:
        return self._q[0].copy() if self._single else self._q.copy()

    def as_matrix(self) -> np.ndarray:
        x, y, z, w = self._q.T
        R = np.stack(
            [
                np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], axis=1),
                np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], axis=1),
                np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], axis=1),
            ],
            axis=1,
        )  # (M, 3, 3)
        return R[0] if self._single else R

    def as_rotvec(self) -> np.ndarray:
        q = np.where(self._q[:, 3:4] < 0, -self._q, self._q)  # w >= 0: angle in [0, pi]
        s = np.linalg.norm(q[:, :3], axis=1)
        angle = 2 * np.arctan2(s, q[:, 3])
        small = angle < 1e-3
        # a / sin(a/2), with its Taylor series near 0
        scale = np.where(small, 2 + angle**2 / 12 + 7 * angle**4 / 2880, angle / np.where(small, 1, np.sin(angle / 2)))
        r = q[:, :3] * scale[:, None]
        return r[0] if self._single else r


class Slerp:
    """Spherical linear interpolation between key rotations at increasing ``times`` (SciPy's ``Slerp``)."""

    def __init__(self, times, rotations: Rotation):
        self.times = np.asarray(times, dtype=np.float64)
        self.q = rotations._q  # (N, 4)
        if len(self.times) != len(self.q) or len(self.times) < 2 or np.any(np.diff(self.times) <= 0):
            raise ValueError("gpu_shim Slerp: need at least two key rotations at strictly increasing times")

    def __call__(self, query_times) -> Rotation:
        t = np.asarray(query_times, dtype=np.float64)
        single = t.ndim == 0
        t = t.reshape(-1)
        if np.any(t < self.times[0]) or np.any(t > self.times[-1]):
            raise ValueError("gpu_shim Slerp: query times outside the key times")
        i = np.clip(np.searchsorted(self.times, t, side="right") - 1, 0, len(self.times) - 2)  # (M,)
        f = (t - self.times[i]) / (self.times[i + 1] - self.times[i])  # (M,)
        q0, q1 = self.q[i], self.q[i + 1]
        dot = np.sum(q0 * q1, axis=1)
        q1 = np.where(dot[:, None] < 0, -q1, q1)  # the shorter arc
        dot = np.abs(dot).clip(max=1.0)
        theta = np.arccos(dot)
        near = theta < 1e-6
        sin = np.where(near, 1.0, np.sin(theta))
        w0 = np.where(near, 1 - f, np.sin((1 - f) * theta) / sin)
        w1 = np.where(near, f, np.sin(f * theta) / sin)
        q = w0[:, None] * q0 + w1[:, None] * q1
        return Rotation(q / np.linalg.norm(q, axis=1, keepdims=True), single)
