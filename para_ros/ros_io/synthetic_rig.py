"""A synthetic two-camera rig over DDS: publishes what a real rig publishes (images, CameraInfo, TF, joint states)
and records what the PARA graph answers (chunks, markers, voxel cloud, diagnostics).

For tests, benchmarks and smoke-testing an ``inference_node`` without a robot or the simulator. Images are fixed
random colours (``seed``); camera and EE poses are whatever the caller passes.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from para_ros.observation.camera_model import camera_info_fields
from para_ros.stamps import set_stamp, stamp_to_ns

DEFAULT_IMAGE_SIZE = 64
DEFAULT_K = np.array([[60.0, 0, 32.0], [0, 60.0, 32.0], [0, 0, 1.0]])


class SyntheticRig:
    """The test side: publishes cameras, CameraInfo, TF, joint states; records chunks, markers, diagnostics."""

    def __init__(
        self,
        T_scene: np.ndarray,
        T_wrist: np.ndarray,
        T_ee: np.ndarray,
        seed: int = 0,
        image_size: int = DEFAULT_IMAGE_SIZE,
        K: np.ndarray = DEFAULT_K,
        node_name: str = "synthetic_rig",
    ):
        import rclpy  # rclpy: loaded on first use, not on import
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import CameraInfo, Image, JointState, PointCloud2
        from visualization_msgs.msg import MarkerArray

        from para_msgs.msg import ActionChunk

        # rclpy: loaded on first use, not on import
        from para_ros.adapters.tf import StaticTransformBroadcaster, TransformBroadcaster

        self.T_scene, self.T_wrist, self.T_ee, self.K = T_scene, T_wrist, T_ee, np.asarray(K, dtype=np.float64)
        self.image_size = image_size
        self.node = rclpy.create_node(node_name)
        self.pub = {
            "scene": self.node.create_publisher(Image, "/scene_cam/image_raw", qos_profile_sensor_data),
            "wrist": self.node.create_publisher(Image, "/wrist_cam/image_raw", qos_profile_sensor_data),
            "scene_info": self.node.create_publisher(CameraInfo, "/scene_cam/camera_info", qos_profile_sensor_data),
            "wrist_info": self.node.create_publisher(CameraInfo, "/wrist_cam/camera_info", qos_profile_sensor_data),
            "joints": self.node.create_publisher(JointState, "/joint_states", 10),
        }
        self.tf = TransformBroadcaster(self.node)
        self.tf_static = StaticTransformBroadcaster(self.node)
        self.chunks, self.markers, self.clouds, self.diagnostics = [], [], [], []
        self.node.create_subscription(ActionChunk, "/para/action_chunk", self.chunks.append, 10)
        self.node.create_subscription(MarkerArray, "/para/markers", self.markers.append, 10)
        self.node.create_subscription(PointCloud2, "/para/voxels", self.clouds.append, 10)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self.diagnostics.append, 50)
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self.executor.spin, daemon=True)
        self._thread.start()
        self.images = synthetic_images(seed, image_size)

    def now_ns(self) -> int:
        return self.node.get_clock().now().nanoseconds

    def transform(self, parent, child, T, stamp_ns):
        from geometry_msgs.msg import TransformStamped  # rclpy: loaded on first use, not on import

        from para_ros.adapters.transforms import matrix_to_transform  # rclpy: loaded on first use, not on import

        t = TransformStamped()
        t.header.frame_id, t.child_frame_id = parent, child
        set_stamp(t.header.stamp, stamp_ns)
        t.transform = matrix_to_transform(T)
        return t

    def camera_info(self, view, stamp_ns, K_ros=None, width=None, height=None):
        """CameraInfo of a view: the rig's K (``para_core`` convention) converted to ROS, or ``K_ros`` verbatim."""
        from sensor_msgs.msg import CameraInfo  # rclpy: loaded on first use, not on import

        width = self.image_size if width is None else width
        height = self.image_size if height is None else height
        info = CameraInfo(width=width, height=height, **camera_info_fields(self.K))
        if K_ros is not None:
            info.k = [float(v) for v in np.asarray(K_ros, dtype=np.float64).ravel()]
        info.header.frame_id = f"{view}_cam_optical_frame"
        set_stamp(info.header.stamp, stamp_ns)
        return info

    def image(self, view, stamp_ns, rgb=None, encoding="rgb8"):
        from sensor_msgs.msg import Image  # rclpy: loaded on first use, not on import

        rgb = self.images[view] if rgb is None else rgb
        msg = Image(
            height=rgb.shape[0],
            width=rgb.shape[1],
            encoding=encoding,
            is_bigendian=0,
            step=rgb.shape[1] * (rgb.shape[2] if rgb.ndim == 3 else 1),
            data=rgb.tobytes(),
        )
        msg.header.frame_id = f"{view}_cam_optical_frame"
        set_stamp(msg.header.stamp, stamp_ns)
        return msg

    def compressed(self, view, stamp_ns, rgb=None, fmt="png"):
        """The view's image as a ``CompressedImage`` (png: lossless, so it decodes to the same pixels)."""
        import cv2  # cv2: loaded on first use, not on import
        from sensor_msgs.msg import CompressedImage  # rclpy: loaded on first use, not on import

        rgb = self.images[view] if rgb is None else rgb
        ok, data = cv2.imencode(f".{fmt}", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
        assert ok, f"cv2 could not encode {fmt}"
        msg = CompressedImage(format=f"rgb8; {fmt} compressed bgr8", data=data.tobytes())
        msg.header.frame_id = f"{view}_cam_optical_frame"
        set_stamp(msg.header.stamp, stamp_ns)
        return msg

    def publish_static_scene(self, T_scene=None):
        T_scene = self.T_scene if T_scene is None else T_scene
        self.tf_static.sendTransform(self.transform("base", "scene_cam_optical_frame", T_scene, 0))

    def publish_observation(
        self,
        stamp_ns,
        *,
        T_wrist=None,
        T_ee=None,
        skip=(),
        info=None,
        images=None,
        tf_extra=(),
        tf_lead_s=0.05,
        transforms=None,
    ):
        """TF for the moving frames at ``stamp_ns`` (and history), CameraInfo, both images, joint states.

        ``skip`` names parts to leave out ("tf", "scene", "wrist", "scene_info", "wrist_info"); ``info`` / ``images``
        replace the messages of a view; ``transforms`` replaces the moving frames' TF (built beforehand by
        :meth:`observation_transforms`); ``tf_lead_s`` is how long TF goes out before the images.
        """
        from sensor_msgs.msg import JointState  # rclpy: loaded on first use, not on import

        if "tf" not in skip:
            tfs = self.observation_transforms(stamp_ns, T_wrist, T_ee) if transforms is None else list(transforms)
            self.tf.sendTransform(tfs + list(tf_extra))
        js = JointState(name=["gripper"], position=[0.8])
        set_stamp(js.header.stamp, stamp_ns)
        self.pub["joints"].publish(js)
        time.sleep(tf_lead_s)  # TF before images, as on a rig where TF runs ahead of the cameras
        for view in ("scene", "wrist"):
            if f"{view}_info" not in skip:
                self.pub[f"{view}_info"].publish((info or {}).get(view) or self.camera_info(view, stamp_ns))
            if view not in skip:
                self.pub[view].publish((images or {}).get(view) or self.image(view, stamp_ns))

    def observation_transforms(self, stamp_ns, T_wrist=None, T_ee=None, history=5, spacing_ns=50_000_000):
        """The moving frames' TF of an observation at ``stamp_ns``: the wrist camera and the EE at ``history`` stamps
        ``spacing_ns`` apart up to ``stamp_ns`` (so past-EE look-ups and interpolation have data), oldest first."""
        T_wrist = self.T_wrist if T_wrist is None else T_wrist
        T_ee = self.T_ee if T_ee is None else T_ee
        tfs = []
        for k in range(history - 1, -1, -1):
            t_ns = stamp_ns - k * spacing_ns
            tfs.append(self.transform("base", "wrist_cam_optical_frame", T_wrist, t_ns))
            tfs.append(self.transform("base", "grasp_site", T_ee, t_ns))
        return tfs

    def wait_chunk_with_stamp(self, stamp_ns, timeout_s=10.0):
        def found():
            return any(stamp_to_ns(c.header.stamp) == stamp_ns for c in self.chunks)

        wait_for(found, timeout_s, what=f"a chunk stamped {stamp_ns}")
        return next(c for c in self.chunks if stamp_to_ns(c.header.stamp) == stamp_ns)

    def diagnostics_mention(self, text) -> bool:
        return any(
            text in s.message or any(text in kv.value for kv in s.values)
            for d in list(self.diagnostics)
            for s in d.status
            if s.name.startswith("para: inference")
        )

    def close(self):
        self.executor.shutdown()
        self.node.destroy_node()


def wait_for(condition, timeout_s: float, spin=None, what: str = "condition", poll_s: float = 0.02) -> None:
    """Call ``spin()`` (or sleep) until ``condition()`` holds; AssertionError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        if spin is not None:
            spin()
        else:
            time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s:.1f} s waiting for {what}")


def synthetic_images(seed: int, image_size: int = DEFAULT_IMAGE_SIZE) -> dict[str, np.ndarray]:
    """The rig's fixed images: {"scene", "wrist"} -> (S, S, 3) uint8 random colours from ``seed``."""
    rng = np.random.default_rng(seed)
    return {v: rng.integers(0, 255, (image_size, image_size, 3), dtype=np.uint8) for v in ("scene", "wrist")}
