"""``calibration_monitor``: the live calibration monitor, checking the scene camera's told pose while the robot works.

Subscribes to the scene camera's images and CameraInfo; for each image (at most ``max_rate_hz``) looks up the flange
pose (``base_frame`` -> ``flange_frame``) at the image's stamp and the told camera pose (``base_frame`` -> the
image's ``frame_id``) in TF, finds the ArUco marker stuck on the gripper and compares it with where the told
calibration and the kinematics put it (:mod:`para_core.calibration.live_monitor`). Publishes on ``/diagnostics``:
level OK / WARN / ERROR from the window's median pixel error, STALE while the marker is not seen (the monitor's
UNKNOWN: no verdict rather than a false OK), values ``calibration_state``, ``reprojection_error_px``,
``reprojection_error_mm``, ``images_checked`` / ``images_seen`` in the window. The simulator renders the marker with
``sim_node calibration_marker:=flange`` (same default mount as here).
"""

from __future__ import annotations

from collections import deque

import numpy as np
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import QoSProfile
from rclpy.time import Time
from sensor_msgs.msg import CameraInfo, Image

from para_core.calibration.detection import check_intrinsics
from para_core.calibration.live_monitor import ERROR, OK, WARN, MarkerMonitor, MonitorConfig
from para_core.calibration.marker import ArucoMarkerSpec
from para_ros.adapters.cv_bridge import image_msg_to_rgb
from para_ros.adapters.tf import Buffer, TransformException, TransformListener
from para_ros.nodes import health
from para_ros.nodes.health import HealthReporter
from para_ros.nodes.parameters import Param, ParameterTable
from para_ros.nodes.runtime import run_node
from para_ros.sim.calibration_board import offset_T
from para_ros.sim.calibration_marker import default_T_gripper_marker
from para_ros.stamps import stamp_to_ns

NODE_NAME = "calibration_monitor"
PENDING_IMAGES = 5  # images waiting for their TF (the arm's TF may arrive after the image)
TF_GIVE_UP_S = 1.0  # an image whose TF has not come this long after the newest image is dropped
DIAGNOSTIC_LEVEL = {OK: health.OK, WARN: health.WARN, ERROR: health.ERROR}

PARAMETERS = ParameterTable(
    NODE_NAME,
    [
        Param("image_topic", "/scene_cam/image_raw", "Scene camera images.", section="topics and frames"),
        Param("camera_info_topic", "/scene_cam/camera_info", "Their CameraInfo (k, d: OpenCV convention)."),
        Param("base_frame", "base", "The arm's base frame (the told camera pose is looked up in it)."),
        Param("flange_frame", "gripper", "The frame the marker is stuck to (the joint6 flange)."),
        Param("max_rate_hz", 10.0, "Check at most this many images per second.", range=(0.1, 1000.0)),
        Param(
            "marker_side_m",
            0.05,
            "The marker's black square side as printed (m).",
            range=(0.005, 0.5),
            section="marker",
        ),
        Param("marker_id", 0, "The marker's id.", range=(0, 999)),
        Param("marker_dictionary", "DICT_4X4_50", "Its OpenCV ArUco dictionary."),
        Param(
            "marker_xyz_m",
            None,
            "Marker frame origin (its top-left outer corner) in flange_frame (m); unset = the simulator's mount.",
            optional=True,
            length=3,
            kind_override="float_list",
        ),
        Param(
            "marker_rpy_deg",
            None,
            "Marker frame orientation in flange_frame, roll-pitch-yaw (deg; z into the marker); unset = the "
            "simulator's mount.",
            optional=True,
            length=3,
            kind_override="float_list",
        ),
        Param(
            "window_s", 2.0, "Sliding window of the verdict (s of image stamps).", range=(0.1, 600.0), section="verdict"
        ),
        Param("warn_px", 2.5, "Median reprojection error from which the level is WARN (px).", range=(0.01, 1e4)),
        Param("error_px", 5.0, "... from which it is ERROR (px; >= warn_px).", range=(0.01, 1e4)),
        Param("min_detections", 3, "Fewest images with the marker in the window for a verdict.", range=(1, 10000)),
    ],
    header="""calibration_monitor: checks the scene camera's told extrinsics (TF) against an ArUco marker on the gripper
and the arm's kinematics, on /diagnostics (OK / WARN / ERROR, STALE = marker not seen). Units: metres, degrees, px.""",
)


def marker_mount(p: dict) -> np.ndarray:
    """(4, 4) ``T_flange_marker`` from the parameters (the simulator's default mount where unset)."""
    T = default_T_gripper_marker(float(p["marker_side_m"]))
    if p["marker_xyz_m"] is not None and len(p["marker_xyz_m"]):
        T[:3, 3] = p["marker_xyz_m"]
    if p["marker_rpy_deg"] is not None and len(p["marker_rpy_deg"]):
        T[:3, :3] = offset_T((0, 0, 0), p["marker_rpy_deg"])[:3, :3]
    return T


class CalibrationMonitorNode(Node):
    """See the module docstring."""

    def __init__(self, node_name: str = NODE_NAME, **kwargs):
        super().__init__(node_name, **kwargs)
        self.params = p = PARAMETERS.declare(self)
        spec = ArucoMarkerSpec(float(p["marker_side_m"]), int(p["marker_id"]), str(p["marker_dictionary"]))
        config = MonitorConfig(
            window_s=p["window_s"], warn_px=p["warn_px"], error_px=p["error_px"], min_detections=p["min_detections"]
        )
        self.monitor = MarkerMonitor(spec, marker_mount(p), config)
        self.tf_buffer = Buffer(cache_time=Duration(seconds=10.0), node=self)
        self.tf_listener = TransformListener(self.tf_buffer, self)
        self._info: CameraInfo | None = None
        self._pending: deque = deque(maxlen=PENDING_IMAGES)
        self._last_checked_ns: int | None = None
        self._min_period_ns = int(1e9 / p["max_rate_hz"])
        self.health = HealthReporter(self, f"{NODE_NAME}: {self.get_name()}", source=self._diagnostics)
        qos = QoSProfile(depth=5)
        self.create_subscription(CameraInfo, p["camera_info_topic"], self._on_info, qos)
        self.create_subscription(Image, p["image_topic"], self._on_image, qos)
        self.create_timer(0.05, self._process_pending)
        self.get_logger().info(
            f"checking {p['image_topic']} against {p['base_frame']} -> {p['flange_frame']} with ArUco "
            f"{spec.dictionary} id {spec.marker_id} ({1000 * spec.side_m:.0f} mm); WARN {p['warn_px']} px, "
            f"ERROR {p['error_px']} px over {p['window_s']} s"
        )

    def _on_info(self, msg: CameraInfo) -> None:
        self._info = msg

    def _on_image(self, msg: Image) -> None:
        stamp_ns = stamp_to_ns(msg.header.stamp)
        if self._last_checked_ns is not None and 0 <= stamp_ns - self._last_checked_ns < self._min_period_ns:
            return
        if self._last_checked_ns is not None and stamp_ns < self._last_checked_ns:
            self.monitor.reset()  # time went back (a reset simulator, a replayed recording)
        self._last_checked_ns = stamp_ns
        self._pending.append(msg)
        self._process_pending()

    def _process_pending(self) -> None:
        while self._pending:
            msg = self._pending[0]
            try:
                waiting = self._check(msg)
            except Exception as exc:  # noqa: BLE001 - a bad message never stops the node
                self.health.count("images_refused")
                self.health.problem("image", f"image refused: {type(exc).__name__}: {exc}")
                waiting = None
            else:
                self.health.clear("image")
            if waiting is not None:  # a short wait is normal (TF after the image); a problem once given up
                key, why = waiting
                newest_ns = stamp_to_ns(self._pending[-1].header.stamp)
                if newest_ns - stamp_to_ns(msg.header.stamp) < TF_GIVE_UP_S * 1e9:
                    return
                self.health.count(f"images_given_up.{key}")
                self.health.problem(key, f"image given up after {TF_GIVE_UP_S:g} s: {why}")
            self._pending.popleft()

    def _check(self, msg: Image) -> tuple[str, str] | None:
        """Check one image; (problem key, why) when what it needs (CameraInfo, TF) is not there yet."""
        p, info = self.params, self._info
        if info is None:
            return "camera_info", f"no CameraInfo on {p['camera_info_topic']}"
        self.health.clear("camera_info")
        if int(info.width) != int(msg.width) or int(info.height) != int(msg.height):
            raise ValueError(f"CameraInfo is {info.width}x{info.height}, the image {msg.width}x{msg.height}")
        K, dist = check_intrinsics(np.asarray(info.k, dtype=np.float64).reshape(3, 3), info.d, name="CameraInfo.k")
        stamp_ns = stamp_to_ns(msg.header.stamp)
        try:
            T_base_flange = self.tf_buffer.lookup_matrix(p["base_frame"], p["flange_frame"], Time(nanoseconds=stamp_ns))
            T_base_cam = self.tf_buffer.lookup_matrix(p["base_frame"], msg.header.frame_id, Time(nanoseconds=stamp_ns))
        except TransformException as exc:
            return "tf", f"no TF at the image stamp: {type(exc).__name__}: {exc}"
        self.health.clear("tf")
        check = self.monitor.observe(image_msg_to_rgb(msg), stamp_ns / 1e9, T_base_flange, T_base_cam, K, dist)
        self.health.count("images_checked")
        if check is not None:
            self.health.count("marker_seen")
        return None

    def _diagnostics(self) -> tuple[int, str, dict]:
        status = self.monitor.status()
        values = {
            "calibration_state": status.level,
            "reprojection_error_px": f"{status.error_px:.3f}",
            "reprojection_error_mm": f"{status.error_mm:.2f}",
            "images_in_window": status.n_checked,
            "images_seen_in_window": status.n_seen,
        }
        return DIAGNOSTIC_LEVEL.get(status.level, health.STALE), status.message, values


def main(argv: list[str] | None = None) -> int:
    """Run the node until Ctrl-C / SIGINT / SIGTERM."""
    return run_node(
        CalibrationMonitorNode,
        prog=NODE_NAME,
        description="Check the scene camera's told calibration against an ArUco marker on the gripper.",
        default_params_file="calibration_monitor.yaml",
        argv=argv,
        epilog=PARAMETERS.help_text(),
    )


if __name__ == "__main__":
    raise SystemExit(main())
