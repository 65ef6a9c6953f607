"""Whether the scene still looks like what the policy was trained on: an unseen object or a hand in the workspace
withholds the chunks until it is gone (ROS-free; the measure is ``para_core.model.familiarity``).

The policy predicts, with each chunk, every view's novelty ratio (``PolicyOutput.novelty_ratio``: the view's image
features against the memory of its training features, 1 = the familiar limit). One novel frame is noise; the check
judges the median of each view's ratio over the last ``window_frames`` observations (the window the limits were fitted
for), and calls the observation unfamiliar while a view's median is above 1. Such an observation gets no chunk: the
executor holds once its chunks stop, and ``familiarity`` on ``/diagnostics`` says which view and how far, e.g.
``the wrist camera sees what the policy never saw: novelty 1.18x the familiar limit (median of 5 frames): chunks
withheld until it looks familiar again``. Chunks flow again once the medians fall back below 1.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from para_core.model.familiarity import FamiliaritySettings

DEFAULT_WINDOW_FRAMES = FamiliaritySettings.window_frames  # the memory's default window


@dataclass
class FamiliarityCheckSettings:
    """``enabled``: check each observation when the policy carries a familiarity memory (it does nothing without
    one); ``window_frames``: observations whose median is judged (0 = the memory's own ``window_frames``)."""

    enabled: bool = True
    window_frames: int = 0

    def __post_init__(self) -> None:
        if int(self.window_frames) < 0:
            raise ValueError(f"familiarity window_frames={self.window_frames} must be 0 (the memory's) or more")


class FamiliarityCheck:
    """The windowed novelty ratios of each view and the verdict; :meth:`reset` at a clock jump."""

    def __init__(self, settings: FamiliarityCheckSettings | None = None):
        self.settings = settings or FamiliarityCheckSettings()
        self._history: deque[np.ndarray] = deque()
        self.last_medians: np.ndarray = np.zeros(0)

    def window_frames(self, memory_window_frames: int | None = None) -> int:
        """Observations judged together: the setting, else the memory's own window (what its limits were fitted
        for), else the memory's default."""
        return int(self.settings.window_frames) or int(memory_window_frames or DEFAULT_WINDOW_FRAMES)

    def reset(self) -> None:
        self._history = deque()
        self.last_medians = np.zeros(0)

    def check(
        self, views: Sequence[str], novelty_ratio: np.ndarray, memory_window_frames: int | None = None
    ) -> str | None:
        """One observation's (N,) novelty ratios (views in ``views`` order; empty: the policy has no memory) -> why
        it is unfamiliar, or None. ``memory_window_frames``: the window of the memory the ratios come from. Never
        raises on the ratios: a NaN ratio counts as unfamiliar."""
        ratio = np.asarray(novelty_ratio, dtype=np.float64).reshape(-1)
        if not self.settings.enabled or ratio.size == 0:
            return None
        if ratio.size != len(views):
            return f"the policy gave {ratio.size} novelty ratios for {len(views)} views: chunk withheld"
        window = self.window_frames(memory_window_frames)
        if self._history.maxlen != window or (self._history and self._history[-1].size != ratio.size):
            self._history = deque(maxlen=window)
        self._history.append(np.where(np.isfinite(ratio), ratio, np.inf))
        medians = np.median(np.stack(self._history), axis=0)  # (N,)
        self.last_medians = medians
        worst = int(np.argmax(medians))
        if medians[worst] <= 1.0:
            return None
        others = [f"the {views[i]} camera {medians[i]:.2f}x" for i in range(len(views)) if i != worst]
        return (
            f"the {views[worst]} camera sees what the policy never saw: novelty {medians[worst]:.2f}x the familiar "
            f"limit (median of {len(self._history)} frames{'; ' + ', '.join(others) if others else ''}): chunks "
            f"withheld until it looks familiar again"
        )
