"""Hand-eye samples from a rosbag2 recording: every image of a camera where the board is found, with the flange pose
(TF ``base`` -> ``gripper`` at the image's stamp) and the camera's intrinsics (its CameraInfo ``k`` and ``d``, OpenCV's
pixel-centre convention, the one :func:`para_core.calibration.detection.detect_charuco` reports corners in).

The bag is read with :class:`para_ros.bag.reader.BagReader` (TF, joint states) without needing a TF for the cameras:
the point of a calibration is that there may be none yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from para_core.calibration.detection import check_intrinsics, detect_charuco
from para_core.calibration.handeye import HandEyeSample
from para_core.model.rotations import rotation_angle_between
from para_ros.bag.reader import BagError, BagReader, BagTopicConfig, decode_image
from para_ros.stamps import stamp_to_ns

STILL_M = 0.0005  # flange motion allowed around an image stamp (metres, degrees)
STILL_DEG = 0.05
CAMERA_TOPICS = {"scene_cam": "/scene_cam", "wrist_cam": "/wrist_cam"}


@dataclass
class CameraSamples:
    """What a recording gives for one camera: the samples (board found), the images they came from, and the counts
    of images dropped and why."""

    camera: str
    frame_id: str
    samples: list = field(default_factory=list)  # HandEyeSample
    images: list = field(default_factory=list)  # (H, W, 3) uint8 RGB, same order as samples
    stamps_ns: list = field(default_factory=list)
    n_images: int = 0
    dropped: dict = field(default_factory=dict)

    def drop(self, why: str) -> None:
        self.dropped[why] = self.dropped.get(why, 0) + 1


def read_camera_samples(
    bag_path,
    camera: str,
    spec,
    namespace: str | None = None,
    flange_frame: str = "gripper",
    base_frame: str = "base",
    max_images: int | None = None,
    keep_images: bool = True,
    still_window_s: float = 0.1,
) -> CameraSamples:
    """Samples of ``camera`` from the bag at ``bag_path``.

    An image is used only if the flange was still (moved less than :data:`STILL_M` and :data:`STILL_DEG`) between
    ``still_window_s`` before and after its stamp, where TF exists: the image and the TF then agree whatever the
    camera's exposure and stamp delays.

    :raises para_ros.bag.reader.BagError: unreadable bag, no images / CameraInfo of that camera, no TF from
        ``base_frame`` to ``flange_frame`` (each message says what is missing).
    :raises para_core.calibration.errors.CalibrationError: a CameraInfo with a zero focal length.
    """
    ns = (namespace or CAMERA_TOPICS[camera]).rstrip("/")
    config = BagTopicConfig(world_frame=base_frame, ee_frame=flange_frame)
    out = CameraSamples(camera, "")
    hint = (
        f"Record them (para-calib capture does) or give the camera's topic namespace (--{camera.replace('_', '-')}-ns)"
    )
    with BagReader(bag_path, config, cameras=False) as bag:
        frames = flange_posed_images(bag, bag_path, ns, camera, flange_frame, base_frame, out, hint, max_images)
        for img, stamp, K, dist, T_base_flange in frames:
            if not _still_around(bag, flange_frame, stamp, T_base_flange, still_window_s):
                out.drop(f"arm moving within {still_window_s} s of the image")
                continue
            rgb = decode_image(img)  # (H, W, 3)
            det = detect_charuco(rgb, spec, K, dist)
            if det is None:
                out.drop("board not found")
                continue
            out.frame_id = out.frame_id or str(img.header.frame_id)
            out.samples.append(
                HandEyeSample(
                    T_base_flange=T_base_flange,
                    detection=det,
                    K=K,
                    dist=dist if dist.size else None,
                    image_size=(int(img.width), int(img.height)),
                )
            )
            out.stamps_ns.append(stamp)
            if keep_images:
                out.images.append(rgb)
    return out


def flange_posed_images(bag, bag_path, namespace: str, camera: str, flange_frame: str, base_frame: str, out, hint: str,
                        max_images: int | None = None):  # fmt: skip
    """The images of the camera on ``namespace`` (``image_raw`` + ``camera_info``) in an open ``BagReader``, each as
    (image message, stamp ns, K (3, 3), distortion (n,), T_base_flange (4, 4) at the stamp): the CameraInfo logged
    nearest to it, checked (:func:`check_intrinsics`) and of the image's size, and TF ``base_frame`` ->
    ``flange_frame`` at the stamp. ``out`` counts the images (``n_images``, at most ``max_images``) and the dropped
    ones (``out.drop(why)``).

    :raises para_ros.bag.reader.BagError: no images / CameraInfo on ``namespace`` (the message ends with ``hint``).
    """
    image_topic, info_topic = f"{namespace}/image_raw", f"{namespace}/camera_info"
    topics = bag.topics
    for topic, what in ((image_topic, "images"), (info_topic, "CameraInfo")):
        if topic not in topics:
            raise BagError(
                f"bag {str(bag_path)!r} has no {camera} {what} on {topic!r}; it has: "
                f"{', '.join(sorted(topics)) or 'no topics'}. {hint}"
            )
    infos = list(bag.messages(info_topic))
    info_logs = np.array([t for t, _ in infos], dtype=np.int64)
    for log_ns, img in bag.messages(image_topic):
        if max_images is not None and out.n_images >= max_images:
            break
        out.n_images += 1
        stamp = stamp_to_ns(img.header.stamp) or log_ns
        info = infos[int(np.argmin(np.abs(info_logs - log_ns)))][1]
        K = np.asarray(info.k, dtype=np.float64).reshape(3, 3)
        dist = np.asarray(info.d, dtype=np.float64).reshape(-1)
        K, dist = check_intrinsics(K, dist, name=f"{camera} CameraInfo.k")
        if int(info.width) != int(img.width) or int(info.height) != int(img.height):
            out.drop("CameraInfo size differs from the image")
            continue
        T_base_flange = bag.try_lookup(flange_frame, stamp)
        if T_base_flange is None:
            out.drop(f"no TF {base_frame} -> {flange_frame} at the image stamp")
            continue
        yield img, stamp, K, dist, T_base_flange


def _still_around(bag, frame: str, stamp_ns: int, T: np.ndarray, window_s: float) -> bool:
    """True when the flange pose ``window_s`` before and after ``stamp_ns`` (where TF has it) is within
    :data:`STILL_M` / :data:`STILL_DEG` of ``T``."""
    for dt in (-window_s, window_s):
        other = bag.try_lookup(frame, stamp_ns + int(dt * 1e9))
        if other is None:
            continue
        if (
            np.linalg.norm(other[:3, 3] - T[:3, 3]) > STILL_M
            or np.degrees(rotation_angle_between(other[:3, :3], T[:3, :3])) > STILL_DEG
        ):
            return False
    return True
