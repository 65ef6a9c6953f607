"""Whether a camera's images show the scene at all: a camera **covered** (a lens cap, a hand on the lens, a dead
sensor: an image of one flat colour) or **frozen** (a stuck driver sending the same image again and again, with new
stamps, while the arm moves in front of it).

The policy cannot be trusted to notice either: trained on live images, it reads a frozen scene view as a scene where
nothing moves, and a black one as a scene with nothing in it, and stays confident for seconds while the wrist camera
carries it (docs/confidence.md). Both are facts about the image, checked before the policy sees it: an observation
with such an image is refused (the inference node publishes no chunk, so the executor holds after its
``stale_timeout_s``) and ``/diagnostics`` names the camera and why.

*Covered*: the standard deviation of the grey levels (0..255, over a 4-pixel grid) at or below
``min_contrast_levels``. Any lit scene has edges; a sensor's noise alone is about 1-3 levels, a scene an order of
magnitude more.

*Frozen*: the image is byte for byte the one before for ``frozen_after_s`` while the tool moved at least
``frozen_tool_motion_m`` since it last changed. The motion condition matters: in a simulator (or behind a
denoising driver) a still scene renders the same bytes, and the arm that holds still is then no fault; a camera that
watches the arm cannot show the same image after the tool has moved centimetres. A real sensor's noise changes the
bytes of every frame, so a repeat is a repeat of the buffer.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

CONTRAST_GRID_PX = 4  # the contrast is measured on every 4th pixel in both directions (a 256 px image: 4096 pixels)


@dataclass(frozen=True)
class CameraCheckSettings:
    """The inference node's ``camera_*`` parameters (module docstring).

    Args:
        enabled: check every observation's images (false: the policy sees whatever comes).
        min_contrast_levels: an image whose grey levels' standard deviation (0..255) is at most this is covered.
        frozen_after_s: an unchanged image this long (image stamps) while the tool moved is frozen.
        frozen_tool_motion_m: ... how far the tool must have moved meanwhile (m).
    """

    enabled: bool = True
    min_contrast_levels: float = 2.0
    frozen_after_s: float = 0.5
    frozen_tool_motion_m: float = 0.01

    def __post_init__(self):
        if not (math.isfinite(self.min_contrast_levels) and 0.0 <= self.min_contrast_levels < 128.0):
            raise ValueError(f"camera_min_contrast_levels={self.min_contrast_levels!r}: use 0..128 grey levels")
        if not (math.isfinite(self.frozen_after_s) and 0.0 < self.frozen_after_s <= 60.0):
            raise ValueError(f"camera_frozen_after_s={self.frozen_after_s!r}: use (0, 60] s")
        if not (math.isfinite(self.frozen_tool_motion_m) and 0.0 < self.frozen_tool_motion_m <= 1.0):
            raise ValueError(f"camera_frozen_tool_motion_m={self.frozen_tool_motion_m!r}: use (0, 1] m")


def grey_level_spread(rgb: np.ndarray) -> float:
    """Standard deviation of the grey levels (0..255) of an (H, W, 3) image on a :data:`CONTRAST_GRID_PX` grid."""
    grid = np.asarray(rgb)[::CONTRAST_GRID_PX, ::CONTRAST_GRID_PX].astype(np.float32)  # (h, w, 3)
    return float(grid.mean(axis=-1).std())


@dataclass
class _Seen:
    """The last distinct image of one camera: its fingerprint, from when (s) and where the tool was then (m)."""

    fingerprint: bytes
    since_s: float
    tool_xyz_m: np.ndarray  # (3,)


class CameraCheck:
    """Judges each camera's images in order (module docstring); one per inference pipeline."""

    def __init__(self, settings: CameraCheckSettings | None = None):
        self.settings = settings or CameraCheckSettings()
        self._seen: dict[str, _Seen] = {}

    def reset(self) -> None:
        """Forget every camera's last image (the clock jumped back: a new run)."""
        self._seen.clear()

    def check(self, view: str, rgb: np.ndarray, stamp_s: float, tool_xyz_m) -> str | None:
        """Why the image of ``view`` at ``stamp_s`` (the tool at ``tool_xyz_m``, world metres) cannot be used, or
        None. Call it for every observation, in stamp order."""
        if not self.settings.enabled:
            return None
        tool = np.asarray(tool_xyz_m, dtype=np.float64).reshape(3)
        spread = grey_level_spread(rgb)
        if spread <= self.settings.min_contrast_levels:
            self._seen.pop(view, None)
            return (
                f"the {view} camera shows one flat colour (grey levels spread {spread:.1f} <= "
                f"{self.settings.min_contrast_levels:g}, mean {float(np.mean(rgb)):.0f}): covered, capped or dead"
            )
        fingerprint = hashlib.blake2b(np.ascontiguousarray(rgb).tobytes(), digest_size=16).digest()
        seen = self._seen.get(view)
        if seen is None or seen.fingerprint != fingerprint or stamp_s < seen.since_s:
            self._seen[view] = _Seen(fingerprint, float(stamp_s), tool)
            return None
        unchanged_s = float(stamp_s) - seen.since_s
        moved_m = float(np.linalg.norm(tool - seen.tool_xyz_m))
        if unchanged_s >= self.settings.frozen_after_s and moved_m >= self.settings.frozen_tool_motion_m:
            return (
                f"the {view} camera's image has not changed for {unchanged_s:.2f} s while the tool moved "
                f"{100 * moved_m:.1f} cm: frozen (a stuck driver or camera; its stamps go on)"
            )
        return None
