"""The live calibration monitor: the scene camera's TOLD extrinsics checked against the arm itself while it works.

An ArUco marker stuck on the gripper (:mod:`para_core.calibration.marker`) is detected in each scene image; the arm's
forward kinematics at the image's stamp (``T_base_flange``), the marker's mount on the flange (``T_flange_marker``)
and the told camera pose (``T_base_cam``, what TF says) predict where its four corners should be:
``T_cam_marker = T_base_cam^-1 @ T_base_flange @ T_flange_marker``, projected with ``cv2.projectPoints``. The
per-image error is the rms pixel distance between the detected and the predicted corners; its millimetre figure is
each corner's pixel error times its depth over the focal length (the lateral distance at the marker that the pixel
error stands for). Over a sliding window of ``window_s`` the median of the per-image errors decides the level:

* ``OK`` below ``warn_px``; ``WARN`` from ``warn_px``; ``ERROR`` from ``error_px``;
* ``UNKNOWN`` when fewer than ``min_detections`` images in the window showed the marker (never seen, covered,
  turned away): the monitor does not claim OK for a calibration it could not check.

A median of several images keeps one bad detection (motion blur, a partial occlusion) from raising a warning, and a
knocked camera shows within ``window_s`` (the median flips once half the window's images are after the knock).

ROS-free; the ``calibration_monitor`` node feeds it and publishes :meth:`CalibrationMonitor.status` on
``/diagnostics``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from para_core.calibration.errors import CalibrationError
from para_core.calibration.marker import ArucoMarkerSpec, detect_marker, marker_pixel_error
from para_core.model.rotations import check_rigid

OK, WARN, ERROR, UNKNOWN = "OK", "WARN", "ERROR", "UNKNOWN"
LEVELS = (OK, WARN, ERROR, UNKNOWN)


@dataclass(frozen=True)
class MonitorConfig:
    """Thresholds and window of the monitor.

    Args:
        window_s: length of the sliding window, seconds of image stamps.
        warn_px: median reprojection error (rms over the marker's corners, pixels) from which the level is WARN.
        error_px: ... from which it is ERROR (at least ``warn_px``).
        min_detections: fewest images with the marker in the window for a verdict; fewer -> UNKNOWN.
    """

    window_s: float = 2.0
    warn_px: float = 2.5
    error_px: float = 5.0
    min_detections: int = 3

    def __post_init__(self) -> None:
        for name in ("window_s", "warn_px", "error_px"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise CalibrationError(f"MonitorConfig.{name} = {v!r} is invalid: give a positive number")
        if self.error_px < self.warn_px:
            raise CalibrationError(
                f"MonitorConfig.error_px = {self.error_px} is below warn_px = {self.warn_px}: give error_px >= warn_px"
            )
        v = self.min_detections
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise CalibrationError(f"MonitorConfig.min_detections = {v!r} is invalid: give an integer >= 1")


@dataclass(frozen=True)
class MarkerCheck:
    """One image's check: ``error_px`` rms corner distance (pixels), ``error_mm`` its lateral figure at the marker
    (millimetres), ``depth_m`` the marker's mean depth."""

    stamp_s: float
    error_px: float
    error_mm: float
    depth_m: float


@dataclass(frozen=True)
class MonitorStatus:
    """The monitor's verdict over its window: ``level`` (one of :data:`LEVELS`), the window's median errors (NaN
    when UNKNOWN), how many images were checked and seen in it, and a sentence for a user."""

    level: str
    error_px: float
    error_mm: float
    n_checked: int
    n_seen: int
    message: str


def check_marker(
    corners_px, T_base_flange, T_flange_marker, T_base_cam, K, spec: ArucoMarkerSpec, dist=None, stamp_s: float = 0.0
) -> MarkerCheck:
    """The :class:`MarkerCheck` of one detection (``corners_px`` (4, 2), OpenCV pixel-centre convention) against the
    kinematics and the told calibration (the module docstring's model).

    :raises CalibrationError: a non-rigid pose, a bad K, corners of the wrong shape, a marker behind the camera.
    """
    corners = np.asarray(corners_px, dtype=np.float64)
    if corners.shape != (4, 2) or not np.all(np.isfinite(corners)):
        raise CalibrationError(f"corners_px has shape {corners.shape}: give the marker's 4 finite (u, v) corners")
    K = np.asarray(K, dtype=np.float64)
    if K.shape != (3, 3) or not np.all(np.isfinite(K)) or K[0, 0] <= 0 or K[1, 1] <= 0:
        raise CalibrationError(
            f"K = {K.tolist()} is not a calibrated 3x3 camera matrix: give the CameraInfo's k (positive focal lengths)"
        )
    try:
        poses = [
            check_rigid(T, name=n)
            for T, n in (
                (T_base_flange, "T_base_flange"),
                (T_flange_marker, "T_flange_marker"),
                (T_base_cam, "T_base_cam"),
            )
        ]
    except ValueError as exc:
        raise CalibrationError(str(exc)) from exc
    T_base_flange, T_flange_marker, T_base_cam = poses
    T_cam_marker = np.linalg.inv(T_base_cam) @ T_base_flange @ T_flange_marker  # (4, 4)
    err_px, depth_m = marker_pixel_error(corners, T_cam_marker, spec, K, dist)  # (4,), (4,)
    if np.any(depth_m <= 0):
        raise CalibrationError("the told calibration puts the marker behind the camera: the told pose is far off")
    f_px = 0.5 * (K[0, 0] + K[1, 1])
    err_mm = 1000.0 * err_px * depth_m / f_px  # (4,)
    return MarkerCheck(
        stamp_s=float(stamp_s),
        error_px=float(np.sqrt(np.mean(err_px**2))),
        error_mm=float(np.sqrt(np.mean(err_mm**2))),
        depth_m=float(np.mean(depth_m)),
    )


class CalibrationMonitor:
    """The sliding-window verdict (see the module docstring). Feed every scene image: :meth:`add_check` when the
    marker was found, :meth:`add_unseen` when not; read :meth:`status`."""

    def __init__(self, config: MonitorConfig | None = None):
        self.config = config or MonitorConfig()
        self._images: deque = deque()  # (stamp_s, MarkerCheck | None), oldest first
        self.n_images = 0
        self.n_seen = 0

    def add_check(self, check: MarkerCheck) -> None:
        self._add(check.stamp_s, check)
        self.n_seen += 1

    def add_unseen(self, stamp_s: float) -> None:
        self._add(float(stamp_s), None)

    def reset(self) -> None:
        """Forget the window (time jumped back: a reset simulator, a replayed recording)."""
        self._images.clear()

    def _add(self, stamp_s: float, check: MarkerCheck | None) -> None:
        if self._images and stamp_s < self._images[-1][0]:
            self.reset()
        self._images.append((stamp_s, check))
        self.n_images += 1
        self._trim(stamp_s)

    def _trim(self, now_s: float) -> None:
        while self._images and self._images[0][0] < now_s - self.config.window_s:
            self._images.popleft()

    def status(self, now_s: float | None = None) -> MonitorStatus:
        """The verdict over the images of the last ``window_s`` (up to ``now_s``, default the newest image)."""
        if now_s is not None:
            self._trim(float(now_s))
        c = self.config
        checks = [chk for _, chk in self._images if chk is not None]
        n = len(self._images)
        if len(checks) < c.min_detections:
            if self.n_seen == 0:
                why = f"marker never seen in {self.n_images} scene images"
            else:
                why = f"marker seen in {len(checks)} of {n} scene images of the last {c.window_s:g} s"
            return MonitorStatus(
                UNKNOWN,
                float("nan"),
                float("nan"),
                n,
                len(checks),
                f"calibration unchecked: {why} (need {c.min_detections}); is the marker in view?",
            )
        px = float(np.median([chk.error_px for chk in checks]))
        mm = float(np.median([chk.error_mm for chk in checks]))
        level = ERROR if px >= c.error_px else WARN if px >= c.warn_px else OK
        figures = f"{px:.2f} px ({mm:.1f} mm at the marker), median of {len(checks)} images over {c.window_s:g} s"
        if level == OK:
            message = f"scene camera calibration ok: {figures}"
        else:
            limit = c.error_px if level == ERROR else c.warn_px
            message = (
                f"scene camera calibration off: {figures} (>= {limit:g} px): the camera moved or the told pose is "
                "wrong; check it (para-calib refine RECORDING re-estimates it)"
            )
        return MonitorStatus(level, px, mm, n, len(checks), message)


class MarkerMonitor(CalibrationMonitor):
    """A :class:`CalibrationMonitor` fed with whole scene images: it finds the marker itself.

    Args:
        spec: the marker (:class:`para_core.calibration.marker.ArucoMarkerSpec`).
        T_flange_marker: (4, 4) the marker frame in the flange frame (where it is stuck).
        config: the window and thresholds.
    """

    def __init__(self, spec: ArucoMarkerSpec, T_flange_marker, config: MonitorConfig | None = None):
        super().__init__(config)
        if not isinstance(spec, ArucoMarkerSpec):
            raise CalibrationError(f"spec is a {type(spec).__name__}; give the ArucoMarkerSpec of the stuck marker")
        try:
            self.T_flange_marker = check_rigid(T_flange_marker, name="T_flange_marker")
        except ValueError as exc:
            raise CalibrationError(str(exc)) from exc
        self.spec = spec

    def observe(self, image, stamp_s: float, T_base_flange, T_base_cam, K, dist=None) -> MarkerCheck | None:
        """Check one scene image ((H, W, 3) uint8, ``K`` in OpenCV's pixel-centre convention); the check, or None
        when the marker was not found (counted as unseen)."""
        corners = detect_marker(image, self.spec)
        if corners is None:
            self.add_unseen(stamp_s)
            return None
        check = check_marker(corners, T_base_flange, self.T_flange_marker, T_base_cam, K, self.spec, dist, stamp_s)
        self.add_check(check)
        return check
