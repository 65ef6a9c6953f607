"""PARA episodes <-> LeRobotDataset v3 directories, written and read with the LeRobot library itself.

Export layout (``write_lerobot_dataset``), one frame per episode frame, ``fps`` = the episode rate rounded to an
integer (LeRobot's frame clock: timestamp = frame_index / fps; the real acquisition stamps travel in ``para.stamp``):

==================================== ======= ======== ==============================================================
feature                              dtype   shape    meaning
==================================== ======= ======== ==============================================================
``observation.images.<view>``        video   (H,W,3)  one video stream per camera view (RGB)
``observation.state``                float32 (8,)     tool pose in base (x, y, z m, qx, qy, qz, qw) + gripper 0..1
``action``                           float32 (8,)     the same at the next frame (the last frame repeats): PARA
                                                      trains on these future tool poses (chunks of them)
``observation.tool_pose``            float64 (17,)    T_base_tool row-major (16) + gripper opening 0..1, exact
``observation.cameras.<view>.K``     float64 (9,)     intrinsics of the stored images, row-major, pixels, in
                                                      OpenCV's / CameraInfo's convention (pixel centres at
                                                      integers: cx = 127.5 for a centred 256-px camera)
``observation.cameras.<view>.T_base_cam`` float64 (16,) camera (OpenCV optical) pose in base, row-major, per frame
``para.stamp``                       int64   (2,)     acquisition stamp (seconds, nanoseconds), as a ROS stamp
==================================== ======= ======== ==============================================================

``meta/info.json`` gains a ``para`` mapping: ``view_names``, ``camera_keys``, ``intrinsics_convention``
(:data:`INTRINSICS_CONVENTION`, ``"opencv"``: what the K features are in) and ``calibration`` (the content of the
calibration file, ``para_calibration: 1``, when one was given; otherwise the static scene camera pose found in the
data).

Import (``read_lerobot_episodes``): with the calibration features present (an export of this package) the episodes
come back exactly (poses bit-equal, K converted back to ``para_core``'s pixel-centre convention by
:mod:`para_core.model.pixel_convention`, images through the video codec); an export without
``intrinsics_convention`` (older versions of this package) holds ``para_core``'s convention and is read as it is.
Without them (a dataset recorded with LeRobot's YAM plugins: joint positions as ``observation.state``, two cameras)
the caller supplies ``joints_to_poses``: (N, 6) arm joints in radians -> (T_base_tool (N, 4, 4), {view: T_base_cam
(N, 4, 4)}), from a calibration file and the YAM's forward kinematics (``para_ros.robot.lerobot_yam``), plus per-view
intrinsics.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from para_core.data.dataset import Episode
from para_core.data.lerobot_compat import lerobot_dataset_classes, video_backend
from para_core.model.pixel_convention import para_K_to_ros, ros_K_to_para
from para_core.model.rotations import matrix_to_quaternion

STATE_NAMES = ("x", "y", "z", "qx", "qy", "qz", "qw", "gripper")
IMAGE_KEY = "observation.images.{view}"
K_KEY = "observation.cameras.{view}.K"
T_KEY = "observation.cameras.{view}.T_base_cam"
TOOL_KEY = "observation.tool_pose"
STAMP_KEY = "para.stamp"
DEFAULT_REPO_ID = "local/para_export"
# The K features' pixel convention: OpenCV's / ROS CameraInfo's (a pixel's centre at integer coordinates), what a
# LeRobot user projecting with cv2.projectPoints expects. Exports before this field held para_core's (centre + 0.5).
INTRINSICS_CONVENTION = "opencv"
LEGACY_INTRINSICS_CONVENTION = "para_pixel_centre"
INTRINSICS_CONVENTIONS = (INTRINSICS_CONVENTION, LEGACY_INTRINSICS_CONVENTION)
# LeRobot's YAM plugins (lerobot-robot-yam): motors "<name>.pos", arm joints in degrees (use_degrees) and the gripper
# 0 closed .. 100 open; the camera names are the user's (here the package's view names).
YAM_JOINT_NAMES = (
    "shoulder_pan.pos",
    "shoulder_lift.pos",
    "elbow_flex.pos",
    "wrist_flex.pos",
    "wrist_roll.pos",
    "wrist_rotate.pos",
)
YAM_GRIPPER_NAME = "gripper.pos"


class LeRobotDataError(ValueError):
    """A LeRobot dataset that cannot be read or written as asked; the message names what is missing."""


def is_lerobot_dataset(path: str | Path) -> bool:
    """True when ``path`` is a LeRobotDataset directory (``meta/info.json`` with a ``codebase_version``)."""
    info = Path(path) / "meta" / "info.json"
    if not info.is_file():
        return False
    try:
        return "codebase_version" in json.loads(info.read_text())
    except (OSError, json.JSONDecodeError):
        return False


def _quat_rows(T: np.ndarray) -> np.ndarray:
    """(N, 4, 4) poses -> (N, 7) x, y, z, qx, qy, qz, qw."""
    return np.array([[*t[:3, 3], *matrix_to_quaternion(t[:3, :3])] for t in T], dtype=np.float64)


# ============================================================================================================ export
def write_lerobot_dataset(
    episodes: list[Episode],
    root: str | Path,
    task: str,
    repo_id: str = DEFAULT_REPO_ID,
    calibration: dict | None = None,
    force: bool = False,
    robot_type: str = "yam",
    vcodec: str = "libsvtav1",
    progress=None,
) -> Path:
    """Write ``episodes`` as one LeRobotDataset v3 directory at ``root`` with LeRobot's ``LeRobotDataset.create``.

    :param task: the task string stored with every frame (LeRobot's ``task``), e.g. "pick the cube".
    :param calibration: the calibration file's content (``CalibrationFile.to_dict()``, ``para_calibration: 1``) to
        store in ``meta/info.json``.
    :param force: replace an existing ``root``; without it an existing directory is refused (nothing written).
    :param vcodec: LeRobot's video codec name (``libsvtav1`` its default, ``h264``).
    :param progress: optional callable(episode_index, n_episodes).
    """
    root = Path(root)
    if not episodes:
        raise LeRobotDataError("no episodes to export; pass recordings or episode directories")
    if not isinstance(task, str) or not task.strip():
        raise LeRobotDataError(f"task={task!r}: give the task in words, e.g. --task 'pick up the cube'")
    views = episodes[0].view_names
    for i, ep in enumerate(episodes):
        if ep.view_names != views:
            raise LeRobotDataError(
                f"episode {i} has views {list(ep.view_names)}, episode 0 has {list(views)}; "
                "export episodes with the same cameras together"
            )
        for v in views:
            if ep.image_size(v) != episodes[0].image_size(v):
                raise LeRobotDataError(
                    f"episode {i}: view {v!r} is {ep.image_size(v)} px, episode 0 has "
                    f"{episodes[0].image_size(v)}; one image size per view and dataset"
                )
    fps = int(round(episodes[0].fps))
    if fps < 1:
        raise LeRobotDataError(f"episode 0 runs at {episodes[0].fps:.3g} Hz; LeRobot needs at least 1 fps")
    if root.exists():
        if not force:
            raise FileExistsError(f"{root} exists; pass --force to replace it (nothing was written)")
        shutil.rmtree(root)
    LeRobotDataset, _, _ = lerobot_dataset_classes()
    features: dict = {}
    for v in views:
        h, w = episodes[0].image_size(v)
        features[IMAGE_KEY.format(view=v)] = {
            "dtype": "video",
            "shape": (h, w, 3),
            "names": ["height", "width", "channels"],
        }
    features["observation.state"] = {"dtype": "float32", "shape": (8,), "names": list(STATE_NAMES)}
    features["action"] = {"dtype": "float32", "shape": (8,), "names": list(STATE_NAMES)}
    # No (1,)-shaped features: LeRobot 0.4 stores those as scalars and numpy 2.4 refuses float() of a (1,) array.
    features[TOOL_KEY] = {"dtype": "float64", "shape": (17,), "names": None}
    for v in views:
        features[K_KEY.format(view=v)] = {"dtype": "float64", "shape": (9,), "names": None}
        features[T_KEY.format(view=v)] = {"dtype": "float64", "shape": (16,), "names": None}
    features[STAMP_KEY] = {"dtype": "int64", "shape": (2,), "names": ["sec", "nanosec"]}
    ds = LeRobotDataset.create(
        repo_id=repo_id, fps=fps, features=features, root=root, robot_type=robot_type, use_videos=True, vcodec=vcodec
    )
    try:
        for e, ep in enumerate(episodes):
            if progress:
                progress(e, len(episodes))
            state = np.concatenate([_quat_rows(ep.T_world_ee), ep.gripper[:, None]], axis=1)  # (N, 8)
            action = state[np.minimum(np.arange(len(ep)) + 1, len(ep) - 1)]  # (N, 8)
            for t in range(len(ep)):
                frame = {IMAGE_KEY.format(view=v): ep.images[v][t] for v in views}
                frame.update(
                    {
                        "observation.state": state[t].astype(np.float32),
                        "action": action[t].astype(np.float32),
                        TOOL_KEY: np.append(ep.T_world_ee[t].reshape(16), ep.gripper[t]),
                        STAMP_KEY: np.array(divmod(int(ep.stamps_ns[t]), 10**9), dtype=np.int64),
                        "task": task,
                    }
                )
                for v in views:
                    frame[K_KEY.format(view=v)] = para_K_to_ros(ep.K[v][t]).reshape(9)  # OpenCV's convention
                    frame[T_KEY.format(view=v)] = ep.T_world_cam[v][t].reshape(16).copy()
                ds.add_frame(frame)
            ds.save_episode()
    finally:
        ds.finalize()
    if calibration is None:  # the scene camera's pose when it is static in the data
        T0 = episodes[0].T_world_cam[views[0]]
        calibration = {
            "source": "poses recorded in the data (no calibration file given)",
            "cameras": {
                views[0]: {
                    "parent_frame": "base",
                    "T_parent_cam": T0[0].tolist(),
                    "static": bool(np.allclose(T0, T0[0], atol=1e-9)),
                }
            },
        }
    info_path = root / "meta" / "info.json"
    info = json.loads(info_path.read_text())
    info["para"] = {
        "format": "para_lerobot",
        "version": 1,
        "view_names": list(views),
        "camera_keys": {v: IMAGE_KEY.format(view=v) for v in views},
        "intrinsics_convention": INTRINSICS_CONVENTION,
        "intrinsics_convention_note": "K features in OpenCV's / ROS CameraInfo's convention: pixel (col, row) centred "
        "at integer (col, row); cv2.projectPoints takes them as they are",
        "state_names": list(STATE_NAMES),
        "action": "tool pose + gripper at the next frame",
        "calibration": calibration,
        "source_episodes": [ep.meta.get("source_bag", "") for ep in episodes],
    }
    info_path.write_text(json.dumps(info, indent=4))
    return root


# ============================================================================================================ import
@dataclass
class LeRobotImportOptions:
    """How to read a LeRobot dataset as PARA episodes.

    :param camera_keys: view name -> video feature key; default ``observation.images.<view>`` for each model view.
    :param view_names: views to read, in policy order.
    :param state_key: joint-space datasets: the feature holding the joint positions (LeRobot's ``observation.state``).
    :param joint_names: names (in the state feature's ``names``) of the 6 arm joints, in chain order.
    :param joint_unit: ``deg`` (LeRobot YAM plugin with ``use_degrees``) or ``rad``.
    :param gripper_name: the gripper's name in the state feature; ``""``: no gripper (stored as 1.0, open).
    :param gripper_scale: value of a fully open gripper (100 for the YAM plugin's 0..100; opening = value / scale).
    :param intrinsics: view -> (3, 3) K at the dataset's image size, for datasets without calibration features.
    """

    view_names: tuple[str, ...] = ("scene", "wrist")
    camera_keys: dict[str, str] = field(default_factory=dict)
    state_key: str = "observation.state"
    joint_names: tuple[str, ...] = YAM_JOINT_NAMES
    joint_unit: str = "deg"
    gripper_name: str = YAM_GRIPPER_NAME
    gripper_scale: float = 100.0
    intrinsics: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self):
        self.view_names = tuple(self.view_names)
        if not self.view_names:
            raise LeRobotDataError("LeRobotImportOptions.view_names is empty; name the camera views, e.g. scene,wrist")
        if self.joint_unit not in ("deg", "rad"):
            raise LeRobotDataError(f"LeRobotImportOptions.joint_unit={self.joint_unit!r}; use 'deg' or 'rad'")
        if not (isinstance(self.gripper_scale, (int, float)) and self.gripper_scale > 0):
            raise LeRobotDataError(
                f"LeRobotImportOptions.gripper_scale={self.gripper_scale!r}; give the open value "
                "(100 for LeRobot's YAM plugin)"
            )
        if len(self.joint_names) != 6:
            raise LeRobotDataError(
                f"LeRobotImportOptions.joint_names has {len(self.joint_names)} names; the YAM arm has 6 joints"
            )

    def camera_key(self, view: str) -> str:
        return self.camera_keys.get(view, IMAGE_KEY.format(view=view))


def video_image_wh(root: str | Path, options: LeRobotImportOptions) -> dict[str, tuple[int, int]]:
    """view -> (width, height) of its video feature in ``meta/info.json``; views whose feature (or the file) is absent
    are left out (``read_lerobot_episodes`` names them)."""
    info_path = Path(root) / "meta" / "info.json"
    if not info_path.is_file():
        return {}
    features = json.loads(info_path.read_text()).get("features", {})
    out = {}
    for view in options.view_names:
        feature = features.get(options.camera_key(view)) or {}
        shape, names = feature.get("shape"), list(feature.get("names") or [])
        if not isinstance(shape, list) or len(shape) != 3:
            continue
        h, w = (
            (shape[names.index("height")], shape[names.index("width")])
            if {"height", "width"} <= set(names)
            else shape[:2]
        )  # LeRobot stores (height, width, channels)
        out[view] = (int(w), int(h))
    return out


def _check_info(root: Path, codebase_version: str) -> dict:
    info_path = root / "meta" / "info.json"
    if not info_path.is_file():
        raise LeRobotDataError(f"{root} is not a LeRobot dataset: no meta/info.json")
    info = json.loads(info_path.read_text())
    version = info.get("codebase_version")
    if version != codebase_version:
        raise LeRobotDataError(
            f"{root} is a LeRobot dataset of version {version!r}; this reader takes "
            f"{codebase_version} (LeRobotDataset v3). Convert it with LeRobot's "
            "lerobot.datasets.v30.convert_dataset_v21_to_v30 first"
        )
    return info


def _check_video_frame_counts(root: Path, meta, video_keys: list[str]) -> None:
    """Each video file must hold as many frames as the table gives its episodes (v3 packs episodes in files)."""
    import av  # av (PyAV, optional: requirements-data.txt): loaded on first use, not on import

    expected: dict[Path, int] = {}
    for ep in range(meta.total_episodes):
        for key in dict.fromkeys(video_keys):  # two views may read one video
            path = root / meta.get_video_file_path(ep, key)
            expected[path] = expected.get(path, 0) + int(meta.episodes[ep]["length"])
    for path, n_table in expected.items():
        if not path.is_file():
            raise LeRobotDataError(f"video file {path} named by meta/episodes is missing")
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            n_video = int(stream.frames) or sum(1 for _ in container.decode(stream))
        if n_video != n_table:
            raise LeRobotDataError(
                f"{path.relative_to(root)} holds {n_video} frames but the table gives its "
                f"episodes {n_table} frames; the video and the data disagree (re-encode or "
                "re-export the dataset)"
            )


def decode_episode_video(path: Path, from_timestamp_s: float, timestamps_s: np.ndarray, fps: float) -> np.ndarray:
    """(n, H, W, 3) uint8 RGB frames of one episode from a LeRobot v3 video file (episodes are concatenated in it;
    the episode's frame i is at ``from_timestamp_s + timestamps_s[i]``), decoded in one sequential pass with PyAV:
    seek to the key frame before the episode, then keep the frame nearest each wanted time (within half a period).
    LeRobot's own reader decodes the same frames one query at a time."""
    import av  # av (PyAV, optional: requirements-data.txt): loaded on first use, not on import

    want = from_timestamp_s + np.asarray(timestamps_s, dtype=np.float64)  # (n,)
    half = 0.5 / fps
    out: list = [None] * want.size
    best = np.full(want.size, np.inf)
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        container.seek(max(int((want[0] - half) / stream.time_base), 0), stream=stream, backward=True)
        for frame in container.decode(stream):
            t = float(frame.time)
            if t > want[-1] + half:
                break
            i = int(np.argmin(np.abs(want - t)))
            if abs(want[i] - t) < min(best[i], half):
                best[i] = abs(want[i] - t)
                out[i] = frame.to_ndarray(format="rgb24")
    missing = [i for i, f in enumerate(out) if f is None]
    if missing:
        raise LeRobotDataError(
            f"{path}: no frame within {half * 1e3:.1f} ms of frame {missing[0]} "
            f"(t={want[missing[0]]:.3f} s) of the episode starting at {from_timestamp_s:.3f} s; "
            "the video and the table disagree"
        )
    return np.stack(out)


def read_lerobot_episodes(
    root: str | Path,
    options: LeRobotImportOptions | None = None,
    joints_to_poses=None,
    repo_id: str = DEFAULT_REPO_ID,
    progress=None,
) -> list[Episode]:
    """Every episode of the LeRobotDataset v3 at ``root`` as a PARA ``Episode`` (read with LeRobot's classes).

    :param joints_to_poses: for datasets without the calibration features: callable (N, 6) radians ->
        (T_base_tool (N, 4, 4), {view: T_base_cam (N, 4, 4)}); ``options.intrinsics`` gives K per view.
    """
    options = options or LeRobotImportOptions()
    root = Path(root)
    LeRobotDataset, LeRobotDatasetMetadata, version = lerobot_dataset_classes()
    info = _check_info(root, version)
    features = info.get("features", {})
    videos = sorted(k for k, f in features.items() if f.get("dtype") == "video")
    missing = [f"{v} -> {options.camera_key(v)}" for v in options.view_names if options.camera_key(v) not in features]
    if missing:
        raise LeRobotDataError(
            f"{root}: no camera feature for {missing}; the dataset's video features are {videos}. Map the views "
            "with --camera-key VIEW=KEY"
        )
    not_video = [
        f"{v} -> {options.camera_key(v)} ({features[options.camera_key(v)].get('dtype')})"
        for v in options.view_names
        if features[options.camera_key(v)].get("dtype") != "video"
    ]
    if not_video:
        raise LeRobotDataError(
            f"{root}: the camera key of {not_video} is not a video feature; the dataset's video features are "
            f"{videos}. Map the views with --camera-key VIEW=KEY"
        )
    has_calibration = (
        all(K_KEY.format(view=v) in features and T_KEY.format(view=v) in features for v in options.view_names)
        and TOOL_KEY in features
    )
    if not has_calibration:
        if joints_to_poses is None:
            raise LeRobotDataError(
                f"{root} has no calibration features ({K_KEY.format(view='<view>')}, "
                f"{T_KEY.format(view='<view>')}, {TOOL_KEY}) and no calibration source was given: pass a "
                "calibration file: para-bag import-lerobot DATASET --calibration calibration.yaml --out EPISODES "
                "(joint positions -> poses by the YAM's kinematics), then train on EPISODES"
            )
        no_k = [v for v in options.view_names if v not in options.intrinsics]
        if no_k:
            raise LeRobotDataError(
                f"{root}: no intrinsics for views {no_k}: give --intrinsics VIEW=fx,fy,cx,cy (at "
                "the dataset's image size) or a calibration file whose camera has a camera_matrix"
            )
        state = features.get(options.state_key)
        if state is None:
            raise LeRobotDataError(f"{root}: no joint-position feature {options.state_key!r}; pass --state-key")
        names = list(state.get("names") or [])
        if isinstance(state.get("names"), dict):
            names = list(next(iter(state["names"].values())))
        wanted = list(options.joint_names) + ([options.gripper_name] if options.gripper_name else [])
        absent = [n for n in wanted if n not in names]
        if absent:
            raise LeRobotDataError(
                f"{root}: {options.state_key} has names {names}, missing {absent}; pass --joint-names / --gripper-name"
            )
        joint_idx = [names.index(n) for n in options.joint_names]
        grip_idx = names.index(options.gripper_name) if options.gripper_name else None
    convention = (info.get("para") or {}).get("intrinsics_convention", LEGACY_INTRINSICS_CONVENTION)
    if has_calibration and convention not in INTRINSICS_CONVENTIONS:
        raise LeRobotDataError(
            f"{root}: meta/info.json para.intrinsics_convention = {convention!r}; this reader knows "
            f"{list(INTRINSICS_CONVENTIONS)} (re-export the dataset with this package)"
        )
    meta = LeRobotDatasetMetadata(repo_id, root=root)
    _check_video_frame_counts(root, meta, [options.camera_key(v) for v in options.view_names])
    ds = LeRobotDataset(repo_id, root=root, video_backend=video_backend())  # LeRobot's own reader checks the rest
    table = ds.hf_dataset.with_format(None)
    episode_col = np.asarray(table["episode_index"])
    episodes = []
    for e in range(meta.total_episodes):
        if progress:
            progress(e, meta.total_episodes)
        rows = np.nonzero(episode_col == e)[0]
        if rows.size == 0:
            continue
        cols: dict[str, list] = {}
        sub = table.select(rows.tolist())
        ep_meta = meta.episodes[e]
        images = {
            v: decode_episode_video(
                root / meta.get_video_file_path(e, options.camera_key(v)),
                float(ep_meta[f"videos/{options.camera_key(v)}/from_timestamp"]),
                np.asarray(sub["timestamp"], dtype=np.float64),
                float(meta.fps),
            )
            for v in options.view_names
        }
        for key in (
            TOOL_KEY,
            STAMP_KEY,
            options.state_key,
            "timestamp",
            *[K_KEY.format(view=v) for v in options.view_names],
            *[T_KEY.format(view=v) for v in options.view_names],
        ):
            if key in sub.column_names:
                cols[key] = np.asarray(sub[key])
        n = rows.size
        if STAMP_KEY in cols:
            stamps = cols[STAMP_KEY].reshape(n, 2).astype(np.int64) @ np.array([10**9, 1], dtype=np.int64)
        else:
            stamps = np.rint(cols["timestamp"].astype(np.float64) * 1e9).astype(np.int64)
        if has_calibration:
            tool = cols[TOOL_KEY].reshape(n, 17).astype(np.float64)
            T_ee, grip = tool[:, :16].reshape(n, 4, 4), tool[:, 16]
            K_stored = {v: cols[K_KEY.format(view=v)].reshape(n, 3, 3).astype(np.float64) for v in options.view_names}
            K = {
                v: np.stack([ros_K_to_para(k) for k in K_stored[v]])
                if convention == INTRINSICS_CONVENTION
                else K_stored[v]
                for v in options.view_names
            }
            T_cam = {v: cols[T_KEY.format(view=v)].reshape(n, 4, 4) for v in options.view_names}
        else:
            q = cols[options.state_key].astype(np.float64)[:, joint_idx]  # (n, 6)
            q_rad = np.deg2rad(q) if options.joint_unit == "deg" else q
            T_ee, T_cam = joints_to_poses(q_rad)
            missing_views = [v for v in options.view_names if v not in T_cam]
            if missing_views:
                raise LeRobotDataError(
                    f"the calibration gives no pose for views {missing_views}; it has {sorted(T_cam)}"
                )
            grip = (
                np.clip(cols[options.state_key][:, grip_idx].astype(np.float64) / options.gripper_scale, 0, 1)
                if grip_idx is not None
                else np.ones(n)
            )
            K = {
                v: np.repeat(np.asarray(options.intrinsics[v], dtype=np.float64)[None], n, axis=0)
                for v in options.view_names
            }
        episodes.append(
            Episode(
                view_names=options.view_names,
                stamps_ns=stamps,
                images=images,
                K=K,
                T_world_cam={v: np.asarray(T_cam[v], dtype=np.float64) for v in options.view_names},
                T_world_ee=np.asarray(T_ee, dtype=np.float64),
                gripper=grip,
                fps=float(meta.fps),
                meta={
                    "source_lerobot": str(root.resolve()),
                    "lerobot_episode": e,
                    "calibration": "features" if has_calibration else "calibration file + forward kinematics",
                },
            )
        )
    if not episodes:
        raise LeRobotDataError(f"{root} holds no frames")
    return episodes


def convert_for_training(
    paths, out_dir: str | Path, options: LeRobotImportOptions | None = None, joints_to_poses=None
) -> list[Path]:
    """LeRobot dataset directories among ``paths`` -> PARA episode directories under ``out_dir`` (one folder per
    dataset); other paths are returned unchanged. Conversion is skipped when ``out_dir/<name>`` was converted from
    the same dataset (path and ``meta/info.json`` modification time)."""
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if not is_lerobot_dataset(p):
            out.append(p)
            continue
        target = Path(out_dir) / p.resolve().name
        done = target / "converted.json"
        source = {
            "source": str(p.resolve()),
            "info_mtime_ns": (p / "meta" / "info.json").stat().st_mtime_ns,
            "camera_keys": dict(sorted((options or LeRobotImportOptions()).camera_keys.items())),
        }
        try:
            previous = json.loads(done.read_text()) if done.is_file() else {}
        except json.JSONDecodeError:
            previous = {}
        if {k: previous.get(k) for k in source} != source:  # new, or the dataset changed since
            if target.exists():
                shutil.rmtree(target)
            episodes = read_lerobot_episodes(p, options, joints_to_poses)
            for i, ep in enumerate(episodes):
                ep.save(target / f"episode_{i:04d}")
            done.write_text(json.dumps({**source, "episodes": len(episodes)}))
        out.append(target)
    return out


def image_error_stats(a: np.ndarray, b: np.ndarray) -> dict:
    """Codec error between two uint8 image stacks: mean and max absolute difference, PSNR (dB)."""
    d = a.astype(np.float64) - b.astype(np.float64)
    mse = float(np.mean(d * d))
    return {
        "mean_abs": float(np.mean(np.abs(d))),
        "max_abs": float(np.max(np.abs(d))),
        "psnr_db": math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse),
    }
