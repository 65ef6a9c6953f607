"""The executor's timeline: the chunks in force, placed by their stamps, and how overlapping chunks are blended.

Every accepted chunk is trimmed of the steps already in the past (latency compensation: the arm never replays
what the policy wanted done before the chunk arrived) and kept until its last step is due. Sampling the timeline
at time t interpolates each chunk that covers t (see :func:`para_ros.execution.interpolation.sample_chunk`) and
blends them:

* ``latest``: the covering chunk with the newest stamp wins (ties: the one received last).
* ``ensemble``: ACT-style temporal ensembling (Zhao et al. 2023). Covering chunks are ordered oldest first
  (by stamp) and chunk j gets weight ``exp(-ensemble_k * j)``; positions and gripper are the weighted mean,
  orientations Markley's weighted mean. ``ensemble_k > 0`` favours older predictions (ACT's choice, smoother),
  ``< 0`` favours newer ones (more reactive), ``0`` is a plain average. ACT indexes predictions per control step;
  here the index is per chunk, because chunks arrive at the policy rate, not the control rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from para_core.model.rotations import quaternion_weighted_mean
from para_ros.execution.chunk import Chunk, trim_past_steps
from para_ros.execution.interpolation import PoseTarget, sample_chunks

BLEND_MODES = ("latest", "ensemble")


@dataclass
class BlendConfig:
    """How overlapping chunks combine.

    Args:
        mode: "latest" (newest covering chunk wins) or "ensemble" (exponentially weighted temporal ensembling).
        ensemble_k: decay of the ensembling weight per chunk, ``w_j = exp(-ensemble_k * j)``, j = 0 the oldest.
        max_chunks: most chunks kept at once; the oldest are dropped beyond it (bounds the per-tick cost when chunks
            flood in).
    """

    mode: str = "latest"
    ensemble_k: float = 0.01
    max_chunks: int = 32

    def __post_init__(self):
        if self.mode not in BLEND_MODES:
            raise ValueError(f"blend mode {self.mode!r} (parameter blend_mode): use one of {BLEND_MODES}")
        if not np.isfinite(self.ensemble_k):
            raise ValueError(f"BlendConfig.ensemble_k={self.ensemble_k!r}: must be finite (e.g. 0.01)")
        if self.max_chunks < 1:
            raise ValueError(f"BlendConfig.max_chunks={self.max_chunks!r}: must be >= 1")


def ensemble_weights(n: int, k: float) -> np.ndarray:
    """(n,) normalised ACT weights ``exp(-k * j) / sum``, j = 0 the oldest chunk."""
    w = np.exp(-k * np.arange(n, dtype=float))  # (n,)
    return w / w.sum()


class Timeline:
    """Chunks in force, ordered by stamp (oldest first). Not thread-safe: the executor core holds the lock."""

    def __init__(self, blend: BlendConfig):
        self.blend = blend
        self._chunks: list[Chunk] = []
        self._newest_latency_s: float | None = None  # arrival - stamp of the newest chunk

    def __len__(self) -> int:
        return len(self._chunks)

    @property
    def chunks(self) -> list[Chunk]:
        return list(self._chunks)

    def clear(self) -> None:
        self._chunks.clear()
        self._newest_latency_s = None

    def add(self, chunk: Chunk, now_s: float) -> bool:
        """Place ``chunk`` on the timeline, dropping its past steps; False if nothing of it is left in the future."""
        trimmed = trim_past_steps(chunk, now_s)
        if trimmed is None:
            return False
        self._chunks.append(trimmed)
        self._chunks.sort(key=lambda c: c.stamp_s)  # stable: equal stamps keep arrival order
        if self._chunks[-1] is trimmed:
            self._newest_latency_s = now_s - chunk.stamp_s
        while len(self._chunks) > self.blend.max_chunks:
            self._chunks.pop(0)
        return True

    def prune(self, now_s: float) -> None:
        """Forget chunks whose last step is due before ``now_s`` and the past steps of the others."""
        kept = []
        for chunk in self._chunks:
            t = chunk.time_from_stamp_s
            if len(t) > 1 and chunk.stamp_s + float(t[1]) >= now_s:
                kept.append(chunk)  # nothing to trim: step 1 is still ahead (trim keeps the step before the next)
                continue
            trimmed = trim_past_steps(chunk, now_s)
            if trimmed is not None:
                kept.append(trimmed)
        self._chunks = kept

    def newest_latency_s(self) -> float | None:
        """How long after its camera frame the newest chunk in force arrived (s; None when empty)."""
        return self._newest_latency_s if self._chunks else None

    def end_s(self) -> float | None:
        """Due time of the last step of any chunk in force (None when empty)."""
        return max((c.due_s[-1] for c in self._chunks), default=None)

    def sample(self, t_s: float) -> tuple[PoseTarget, int] | None:
        """The blended target at ``t_s`` and how many chunks contributed; None if no chunk covers ``t_s``."""
        sampled = sample_chunks(self._chunks, t_s)  # the covering chunks, oldest first
        if sampled is None:
            return None
        positions, quats, gripper, covering = sampled  # (n, 3), (n, 4), (n,)
        n = len(covering)
        if self.blend.mode == "latest" or n == 1:
            return PoseTarget(positions[-1], quats[-1], float(gripper[-1])), n
        w = ensemble_weights(n, self.blend.ensemble_k)  # (n,)
        pos = w @ positions  # (3,)
        quat = quaternion_weighted_mean(quats, w)  # (4,)
        return PoseTarget(pos, quat, float(w @ gripper)), n
