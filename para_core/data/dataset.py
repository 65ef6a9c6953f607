"""Demonstrations on disk (``Episode``) and the training dataset built from them (``EpisodeDataset``).

Episode format (one directory per demonstration, written by ``Episode.save``, read by ``Episode.load``)::

    episode_0001/
      meta.json     {"format": "para_episode", "version": 1, "view_names": [...], "fps": 30.0, "n_frames": N,
                     "image_sizes": {"scene": [H, W], ...}, "meta": {... free-form: source bag, task, robot ...}}
      arrays.npz    np.savez_compressed with plain numeric arrays only (no pickled objects):
                      stamps_ns            (N,)       int64, strictly increasing, nanoseconds
                      T_world_ee           (N, 4, 4)  float64, tool pose (``grasp_site``) in the world frame
                      gripper              (N,)       float64, 0 closed .. 1 open
                      images.<view>        (N, H, W, 3) uint8 RGB
                      K.<view>             (N, 3, 3)  float64, intrinsics of exactly those images (pixels)
                      T_world_cam.<view>   (N, 4, 4)  float64, OpenCV optical frame -> world

Conventions are those of ``docs/contracts.md``: world frame = robot base (metres), cameras in the OpenCV optical
frame, pixel centres at (col + 0.5, row + 0.5), gripper 0 closed .. 1 open. Frame i of every array belongs to the same
instant ``stamps_ns[i]`` (the extractor synchronises cameras, TF and joint states before writing).

Loading never unpickles anything: ``np.load(..., allow_pickle=False)``; an ``arrays.npz`` holding object arrays is
rejected with an error that says so.

Time base of the training targets (``EpisodeDataset``). Step i of a chunk observed at frame t is
``i * frame_stride / dataset_fps`` seconds after ``stamps_ns[t]`` (docs/contracts.md, "Chunk timing"). The stamps are
the truth; the episode's ``fps`` is only informative (``para-bag extract`` stores the measured median rate). With
``time_base="auto"`` an episode is indexed by frame (step i = frame ``t + i * frame_stride``) only when that is the
same thing: its mean rate (frames over the first-to-last span: jitter cancels, a rate error adds up along a chunk) is
within 1 % of ``dataset_fps`` AND every single spacing is within +-25 % of ``1 / dataset_fps`` (no dropped frame, no
pause, no other rate). Any other episode (a 10 Hz or 2 Hz recording, a 30 Hz one with a
dropped frame) is resampled by its stamps: positions and gripper interpolated linearly, rotations slerped, at exactly
``stamps_ns[t] + i * frame_stride / dataset_fps``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from para_core.data import augmentation
from para_core.data.augmentation import Augmentations
from para_core.model.rotations import slerp_rotations

EPISODE_FORMAT = "para_episode"
EPISODE_VERSION = 1
META_FILE = "meta.json"
ARRAYS_FILE = "arrays.npz"
_VIEW_NAME_RE = re.compile(r"^[A-Za-z0-9_\-]+$")


def _err(field_name: str, problem: str, fix: str) -> ValueError:
    return ValueError(f"Episode.{field_name}: {problem}; {fix}")


def _check_finite(field_name: str, array: np.ndarray) -> None:
    if not np.all(np.isfinite(array)):
        bad = np.argwhere(~np.isfinite(array))[0]
        raise _err(
            field_name,
            f"non-finite value (NaN/inf) at index {tuple(int(i) for i in bad)}",
            "drop or repair that frame before building the episode",
        )


def _as_float64(field_name: str, value: Any, shape: tuple) -> np.ndarray:
    """Convert to float64 and check the shape; ``None`` entries in ``shape`` match any size."""
    array = np.asarray(value)
    if array.dtype == object or not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise _err(field_name, f"dtype {array.dtype} is not numeric", "pass a float array")
    if array.ndim != len(shape) or any(s is not None and a != s for a, s in zip(array.shape, shape)):
        want = "(" + ", ".join("N" if s is None else str(s) for s in shape) + ")"
        raise _err(field_name, f"shape {array.shape} does not match {want}", f"pass an array of shape {want}")
    array = array.astype(np.float64, copy=False)
    _check_finite(field_name, array)
    return array


def _check_homogeneous(field_name: str, T: np.ndarray) -> None:
    """Last row must be (0, 0, 0, 1) and the rotation block orthonormal (1e-3 tolerance)."""
    last = T[:, 3, :]
    if not np.allclose(last, np.array([0.0, 0.0, 0.0, 1.0]), atol=1e-6):
        i = int(np.argmax(np.abs(last - np.array([0.0, 0.0, 0.0, 1.0])).max(axis=1)))
        raise _err(
            field_name,
            f"frame {i} is not a homogeneous transform (last row {last[i].tolist()})",
            "pass 4x4 matrices whose last row is [0, 0, 0, 1]",
        )
    R = T[:, :3, :3]
    err = np.abs(np.einsum("nij,nkj->nik", R, R) - np.eye(3)).max(axis=(1, 2))  # (N,)
    det = np.linalg.det(R)  # (N,)
    bad = np.nonzero((err > 1e-3) | (det < 0))[0]
    if bad.size:
        i = int(bad[0])
        raise _err(
            field_name,
            f"frame {i} has a rotation block that is not a proper rotation "
            f"(|R R^T - I| = {err[i]:.2e}, det = {det[i]:.3f})",
            "orthonormalise the rotation (e.g. from a unit quaternion) before saving",
        )


@dataclass
class Episode:
    """One demonstration: N synchronised frames. World frame = robot base. Cameras: OpenCV optical frame.

    Args:
        view_names: camera views present, e.g. ``("scene", "wrist")``; letters, digits, ``_`` and ``-`` only.
        stamps_ns: (N,) int64 acquisition times in nanoseconds, strictly increasing.
        images: view -> (N, H, W, 3) uint8 RGB images (H, W may differ between views).
        K: view -> (N, 3, 3) float64 intrinsics of those images, pixels (per frame: zoom/crop may change).
        T_world_cam: view -> (N, 4, 4) float64 camera (OpenCV optical frame) -> world transforms.
        T_world_ee: (N, 4, 4) float64 tool pose (``grasp_site``) in the world frame.
        gripper: (N,) float64 opening, 0 closed .. 1 open.
        fps: nominal frame rate of the episode, Hz (the stamps are the truth; fps states the sampling intent).
        meta: free-form JSON-able dict (source bag, task, robot ...).

    Construction validates everything and raises ``ValueError`` naming the field, the problem and the fix.
    Integer/float inputs are converted to the documented dtypes; images must already be uint8.
    """

    view_names: tuple[str, ...]
    stamps_ns: np.ndarray
    images: dict[str, np.ndarray]
    K: dict[str, np.ndarray]
    T_world_cam: dict[str, np.ndarray]
    T_world_ee: np.ndarray
    gripper: np.ndarray
    fps: float
    meta: dict = field(default_factory=dict)

    # ---------------------------------------------------------------------------------------------- validation
    def __post_init__(self) -> None:
        if isinstance(self.view_names, str):
            raise _err(
                "view_names", f"got the string {self.view_names!r}", 'pass a tuple of names, e.g. ("scene", "wrist")'
            )
        self.view_names = tuple(str(v) for v in self.view_names)
        if not self.view_names:
            raise _err("view_names", "is empty", "name at least one camera view")
        if len(set(self.view_names)) != len(self.view_names):
            raise _err("view_names", f"{self.view_names} has duplicates", "use distinct view names")
        for v in self.view_names:
            if not _VIEW_NAME_RE.match(v):
                raise _err(
                    "view_names",
                    f"{v!r} has characters other than letters, digits, '_' and '-'",
                    "rename the view (it becomes part of an array name on disk)",
                )

        stamps = np.asarray(self.stamps_ns)
        if stamps.ndim != 1 or stamps.shape[0] < 1:
            raise _err("stamps_ns", f"shape {stamps.shape} is not (N,) with N >= 1", "pass one stamp per frame")
        if not np.issubdtype(stamps.dtype, np.integer):
            raise _err(
                "stamps_ns",
                f"dtype {stamps.dtype} is not an integer type",
                "pass int64 nanoseconds (e.g. sec * 1_000_000_000 + nanosec)",
            )
        self.stamps_ns = stamps.astype(np.int64, copy=False)
        n = int(self.stamps_ns.shape[0])
        steps = np.diff(self.stamps_ns)
        if np.any(steps <= 0):
            i = int(np.nonzero(steps <= 0)[0][0])
            raise _err(
                "stamps_ns",
                f"not strictly increasing at frame {i + 1} "
                f"({int(self.stamps_ns[i])} -> {int(self.stamps_ns[i + 1])} ns)",
                "sort the frames by time and drop duplicates",
            )

        if (
            isinstance(self.fps, bool)
            or not isinstance(self.fps, (int, float, np.floating, np.integer))
            or not math.isfinite(float(self.fps))
            or float(self.fps) <= 0
        ):
            raise _err("fps", f"{self.fps!r} is not a positive finite number", "pass the frame rate in Hz, e.g. 30.0")
        self.fps = float(self.fps)

        for name in ("images", "K", "T_world_cam"):
            mapping = getattr(self, name)
            if not isinstance(mapping, dict):
                raise _err(name, f"is a {type(mapping).__name__}", "pass a dict view name -> array")
            if set(mapping) != set(self.view_names):
                raise _err(
                    name,
                    f"has views {sorted(mapping)} but view_names is {list(self.view_names)}",
                    "give exactly one array per view",
                )

        images = {}
        for v in self.view_names:
            img = np.asarray(self.images[v])
            if img.dtype != np.uint8:
                raise _err(
                    f"images[{v!r}]",
                    f"dtype {img.dtype} is not uint8",
                    "store 8-bit RGB images (convert with np.clip(x, 0, 255).astype(np.uint8))",
                )
            if img.ndim != 4 or img.shape[0] != n or img.shape[3] != 3 or img.shape[1] < 1 or img.shape[2] < 1:
                raise _err(
                    f"images[{v!r}]",
                    f"shape {img.shape} does not match (N={n}, H, W, 3)",
                    "pass one RGB image per frame",
                )
            images[v] = img
        self.images = images
        self.K = {v: _as_float64(f"K[{v!r}]", self.K[v], (n, 3, 3)) for v in self.view_names}
        for v in self.view_names:
            K = self.K[v]
            if not (
                np.all(K[:, 0, 0] > 0) and np.all(K[:, 1, 1] > 0) and np.allclose(K[:, 2, :], np.array([0.0, 0.0, 1.0]))
            ):
                raise _err(
                    f"K[{v!r}]",
                    "is not a pinhole intrinsics matrix (fx, fy > 0, last row [0, 0, 1])",
                    "pass the CameraInfo K of the images (reshaped to 3x3)",
                )
        self.T_world_cam = {
            v: _as_float64(f"T_world_cam[{v!r}]", self.T_world_cam[v], (n, 4, 4)) for v in self.view_names
        }
        for v in self.view_names:
            _check_homogeneous(f"T_world_cam[{v!r}]", self.T_world_cam[v])
        self.T_world_ee = _as_float64("T_world_ee", self.T_world_ee, (n, 4, 4))
        _check_homogeneous("T_world_ee", self.T_world_ee)
        self.gripper = _as_float64("gripper", self.gripper, (n,))
        if np.any(self.gripper < -1e-6) or np.any(self.gripper > 1 + 1e-6):
            i = int(np.nonzero((self.gripper < -1e-6) | (self.gripper > 1 + 1e-6))[0][0])
            raise _err(
                "gripper",
                f"frame {i} has {self.gripper[i]!r}, outside [0, 1]",
                "normalise the opening to 0 closed .. 1 open",
            )
        self.gripper = np.clip(self.gripper, 0.0, 1.0)

        if not isinstance(self.meta, dict):
            raise _err("meta", f"is a {type(self.meta).__name__}", "pass a JSON-able dict")
        try:
            json.dumps(self.meta)
        except (TypeError, ValueError) as exc:
            raise _err(
                "meta", f"is not JSON-serialisable ({exc})", "use only str/int/float/bool/None/list/dict values"
            ) from exc

    # ------------------------------------------------------------------------------------------------ accessors
    def __len__(self) -> int:
        return int(self.stamps_ns.shape[0])

    @property
    def duration_s(self) -> float:
        """Time from the first to the last frame, seconds."""
        return float(self.stamps_ns[-1] - self.stamps_ns[0]) * 1e-9

    def image_size(self, view: str) -> tuple[int, int]:
        """(H, W) of one view's images."""
        return int(self.images[view].shape[1]), int(self.images[view].shape[2])

    # ------------------------------------------------------------------------------------------------------ I/O
    def save(self, directory: str | Path) -> Path:
        """Write ``meta.json`` + ``arrays.npz`` (compressed) into ``directory`` (created if needed); returns it."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, np.ndarray] = {
            "stamps_ns": self.stamps_ns,
            "T_world_ee": self.T_world_ee,
            "gripper": self.gripper,
        }
        for v in self.view_names:
            arrays[f"images.{v}"] = self.images[v]
            arrays[f"K.{v}"] = self.K[v]
            arrays[f"T_world_cam.{v}"] = self.T_world_cam[v]
        header = {
            "format": EPISODE_FORMAT,
            "version": EPISODE_VERSION,
            "view_names": list(self.view_names),
            "fps": self.fps,
            "n_frames": len(self),
            "image_sizes": {v: list(self.image_size(v)) for v in self.view_names},
            "meta": self.meta,
        }
        # Write the arrays first, the header last: a directory with meta.json is a complete episode.
        tmp = directory / (ARRAYS_FILE + ".tmp.npz")
        np.savez_compressed(tmp, **arrays)
        tmp.replace(directory / ARRAYS_FILE)
        (directory / META_FILE).write_text(json.dumps(header, indent=2, sort_keys=True))
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> Episode:
        """Read an episode directory written by ``save``; never unpickles (``allow_pickle=False``)."""
        directory = Path(directory)
        meta_path, arrays_path = directory / META_FILE, directory / ARRAYS_FILE
        if not meta_path.is_file() or not arrays_path.is_file():
            raise FileNotFoundError(
                f"{directory} is not a PARA episode directory (needs {META_FILE} and {ARRAYS_FILE}); "
                f"write episodes with para_core.data.dataset.Episode.save or the bag extractor"
            )
        try:
            header = json.loads(meta_path.read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"{meta_path}: not valid JSON ({exc}); re-export the episode") from exc
        if not isinstance(header, dict) or header.get("format") != EPISODE_FORMAT:
            raise ValueError(
                f"{meta_path}: 'format' is {header.get('format') if isinstance(header, dict) else None!r}"
                f", expected {EPISODE_FORMAT!r}; this is not a PARA episode"
            )
        if header.get("version") != EPISODE_VERSION:
            raise ValueError(
                f"{meta_path}: episode format version {header.get('version')!r} is not supported "
                f"(this code reads version {EPISODE_VERSION}); re-export with a matching version"
            )
        view_names = tuple(header.get("view_names", ()))
        try:
            with np.load(arrays_path, allow_pickle=False) as npz:
                keys = set(npz.files)
                needed = {"stamps_ns", "T_world_ee", "gripper"} | {
                    f"{kind}.{v}" for v in view_names for kind in ("images", "K", "T_world_cam")
                }
                missing = sorted(needed - keys)
                if missing:
                    raise ValueError(f"{arrays_path}: missing array(s) {missing}; re-export the episode")
                data = {k: npz[k] for k in sorted(needed)}
        except ValueError as exc:
            if "allow_pickle" in str(exc) or "Object arrays" in str(exc):
                raise ValueError(
                    f"{arrays_path} holds pickled object arrays; refusing to unpickle a data file (it could run "
                    f"arbitrary code). Re-export the episode with plain numeric arrays (Episode.save)"
                ) from exc
            raise
        return cls(
            view_names=view_names,
            stamps_ns=data["stamps_ns"],
            images={v: data[f"images.{v}"] for v in view_names},
            K={v: data[f"K.{v}"] for v in view_names},
            T_world_cam={v: data[f"T_world_cam.{v}"] for v in view_names},
            T_world_ee=data["T_world_ee"],
            gripper=data["gripper"],
            fps=header.get("fps"),
            meta=header.get("meta", {}),
        )


def is_episode_dir(path: str | Path) -> bool:
    """True if ``path`` holds an episode (``meta.json`` + ``arrays.npz``)."""
    path = Path(path)
    return (path / META_FILE).is_file() and (path / ARRAYS_FILE).is_file()


def find_episode_dirs(paths) -> list[Path]:
    """Expand episode directories or parents of episode directories (searched recursively) to a sorted list.

    Raises ``FileNotFoundError`` naming a path that does not exist or holds no episode.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    found: list[Path] = []
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise FileNotFoundError(f"{p} does not exist; pass episode directories or folders that contain them")
        if is_episode_dir(p):
            found.append(p)
            continue
        inner = sorted(m.parent for m in p.rglob(META_FILE) if is_episode_dir(m.parent))
        if not inner:
            raise FileNotFoundError(f"{p} holds no PARA episode (no {META_FILE} + {ARRAYS_FILE} below it)")
        found.extend(inner)
    unique = sorted(dict.fromkeys(q.resolve() for q in found))
    return unique


# ================================================================================================ training dataset
# Everything below turns episodes into (model inputs, future-chunk targets) pairs. Time base (the chunk contract of
# docs/contracts.md): step i of a chunk observed at frame t is at ``stamps_ns[t] + i * frame_stride / dataset_fps``.
TIME_BASES = ("auto", "index", "stamps")
MEAN_PERIOD_REL_TOL = 0.01  # "auto" indexes by frame only if the mean spacing is within 1 % of 1 / dataset_fps
STEP_PERIOD_REL_TOL = 0.25  # ... and every single spacing within +-25 % of it (a dropped frame is +100 %)


def frame_indexing_matches_stamps(stamps_ns: np.ndarray, dataset_fps: float) -> tuple[bool, str]:
    """Whether frame indexing puts chunk steps at ``i * frame_stride / dataset_fps`` (module docstring rule).

    -> (ok, reason): reason says why not (the measured rate or the worst spacing), "" when ok.
    """
    steps_ns = np.diff(np.asarray(stamps_ns, dtype=np.int64)).astype(np.float64)  # (N - 1,)
    if steps_ns.size == 0:
        return True, ""
    period_ns = 1e9 / float(dataset_fps)
    problems = []
    rel = np.abs(steps_ns - period_ns) / period_ns  # (N - 1,)
    if np.any(rel > STEP_PERIOD_REL_TOL):
        i = int(np.argmax(rel))
        n_bad = int(np.count_nonzero(rel > STEP_PERIOD_REL_TOL))
        gap = steps_ns[i] > period_ns and 2 * n_bad <= steps_ns.size  # a few long spacings among good ones
        problems.append(
            f"{n_bad} of {steps_ns.size} frame spacings differ from 1/{dataset_fps:g} s by more than "
            f"{STEP_PERIOD_REL_TOL:.0%} (worst: {steps_ns[i] * 1e-9:.4f} s after frame {i}"
            + (": a dropped frame or a pause)" if gap else ")")
        )
    mean_ns = float(steps_ns.mean())
    if abs(mean_ns - period_ns) > MEAN_PERIOD_REL_TOL * period_ns:
        problems.append(f"its stamps run at {1e9 / mean_ns:.4g} Hz (mean over the episode), not {dataset_fps:g} Hz")
    if problems:
        return False, "; ".join(problems)
    return True, ""


def future_frame_indices(t: int, n_frames: int, n_window: int, frame_stride: int) -> np.ndarray:
    """(n_window,) frame indices of the chunk observed at frame t: ``t + i * frame_stride``, clamped to the last
    frame (steps past the end of the episode repeat the last frame: the robot holds its final pose)."""
    return np.minimum(t + np.arange(n_window) * frame_stride, n_frames - 1)


def past_frame_indices(t: int, mv_past_n: int, frame_stride: int) -> np.ndarray:
    """(mv_past_n,) frame indices of the past EE positions, oldest first: ``t - k * frame_stride`` for
    k = mv_past_n .. 1, clamped at the episode start (before the start the robot was where it started)."""
    return np.maximum(t - np.arange(mv_past_n, 0, -1) * frame_stride, 0)


def _interp_poses(stamps_ns: np.ndarray, T_world_ee: np.ndarray, gripper: np.ndarray, query_ns: np.ndarray):
    """Poses at arbitrary times (clamped to the episode's time span): positions and gripper linear, rotations slerp.
    -> positions (M, 3), rotations (M, 3, 3), gripper (M,)."""

    t = (stamps_ns - stamps_ns[0]).astype(np.float64) * 1e-9  # (N,) seconds
    q = np.clip((np.asarray(query_ns) - stamps_ns[0]).astype(np.float64) * 1e-9, t[0], t[-1])  # (M,)
    pos = np.stack([np.interp(q, t, T_world_ee[:, k, 3]) for k in range(3)], axis=-1)  # (M, 3)
    grip = np.interp(q, t, gripper)  # (M,)
    rot = slerp_rotations(t, T_world_ee[:, :3, :3], q)  # (M, 3, 3)
    return pos, rot, grip


@dataclass
class _PreparedEpisode:
    """One episode resized for the model: what ``EpisodeDataset.__getitem__`` reads."""

    path: str
    time_base: str  # "index" or "stamps"
    stamps_ns: np.ndarray  # (n,) int64
    images: list  # per model view: (n, S, S, 3) uint8 (in memory or memory-mapped)
    K_img: np.ndarray  # (n, N, 3, 3) float64 intrinsics of the S x S images
    T_world_cam: np.ndarray  # (n, N, 4, 4) float64
    T_world_ee: np.ndarray  # (n, 4, 4) float64
    gripper: np.ndarray  # (n,) float64

    def __len__(self) -> int:
        return int(self.stamps_ns.shape[0])


class EpisodeDataset:
    """Torch ``Dataset`` of training samples: sample = frame t of an episode.

    Each sample (a dict of tensors, batched by the default collate; ``make_batch`` turns a batch into
    ``V4Inputs`` + ``V4Targets`` on a device):

    - ``images`` (N, 3, S, S) uint8 RGB: every view of ``config.view_names`` at frame t, resized to ``img_size`` with
      ``para_core.model.policy.resize_to_model_input`` (the Policy's own preprocessing); ``K_img`` (N, 3, 3) float32, the
      exactly rescaled intrinsics; ``T_world_cam`` (N, 4, 4) float32.
    - ``T_world_ee`` (4, 4), ``gripper`` () : the robot state at frame t.
    - ``past_positions_world`` (mv_past_n, 3): EE positions at frames ``t - k * frame_stride``, k = mv_past_n .. 1
      (oldest first), clamped at the episode start.
    - ``target_positions_world`` (T, 3), ``target_rotations_world`` (T, 3, 3), ``target_gripper`` (T,): the EE at
      frames ``t + i * frame_stride``, i = 0 .. n_window - 1; steps past the end repeat the last frame.
    - ``episode_index``, ``frame_index``: where the sample came from.

    Time base. The chunk's step i is ``i * frame_stride / config.dataset_fps`` seconds after the observation. With
    ``time_base="auto"`` an episode is indexed by frame as above only if its stamps say that frame indices ARE that
    time base (``frame_indexing_matches_stamps``: mean rate within 1 % of ``dataset_fps`` and every spacing within
    +-25 % of ``1 / dataset_fps``; the nominal ``fps`` is not trusted). Any other episode is resampled by its stamps:
    targets at ``stamps_ns[t] + i * frame_stride / dataset_fps`` and past positions at ``stamps_ns[t] - k *
    frame_stride / dataset_fps``, positions and gripper linearly interpolated, rotations slerped, clamped to the
    episode's time span (same end rule). ``"index"`` / ``"stamps"`` force one rule (``"index"`` warns when the stamps
    disagree).
    Observations are always the recorded frames (no image interpolation).

    :param episode_dirs: episode directories (see ``find_episode_dirs`` to expand parent folders).
    :param config: the model config (view names, img_size, n_window, frame_stride, dataset_fps, mv_past_n).
    :param augment: colour jitter (brightness, contrast, saturation, each by a factor in [1 - s, 1 + s] with s =
        ``jitter_strength``, drawn per view and sample from torch's RNG).
    :param augmentations: the ``para_core.data.augmentation.Augmentations`` of training (default: none): the
        calibration error told to the model (``T_world_cam`` and ``K_img`` of the sample, never its images or its
        targets), the consistent zoom / crop (images and ``K_img`` together, exactly) and exposure, gamma, blur and
        noise (after the colour jitter). Drawn per view and sample from torch's RNG, like the jitter; each option
        that is off draws nothing, so a dataset without augmentations gives the same samples as before.
    :param cache_dir: if set, the resized images of each episode are written once as ``.npy`` files there and
        memory-mapped (for datasets larger than RAM); otherwise they are held in memory.
    """

    def __init__(
        self,
        episode_dirs,
        config,
        augment: bool = False,
        jitter_strength: float = 0.2,
        cache_dir: str | Path | None = None,
        time_base: str = "auto",
        augmentations: Augmentations | None = None,
    ):
        if time_base not in TIME_BASES:
            raise ValueError(f"EpisodeDataset time_base={time_base!r}; use one of {TIME_BASES}")
        if not (0.0 <= float(jitter_strength) < 1.0):
            raise ValueError(f"EpisodeDataset jitter_strength={jitter_strength!r}; use a value in [0, 1)")
        if isinstance(episode_dirs, (str, Path)):
            episode_dirs = [episode_dirs]
        self.episode_dirs = [Path(p) for p in episode_dirs]
        if not self.episode_dirs:
            raise ValueError("EpisodeDataset got no episode directories; pass at least one (see find_episode_dirs)")
        self.config = config
        self.augment = bool(augment)
        self.jitter_strength = float(jitter_strength)
        self.augmentations = augmentations if augmentations is not None else Augmentations()
        if not isinstance(self.augmentations, Augmentations):
            raise ValueError(
                f"EpisodeDataset augmentations={augmentations!r}; pass a para_core.data.augmentation.Augmentations"
            )
        self.augmentations.check_views(config.view_names)
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.time_base = time_base
        self.episodes: list[_PreparedEpisode] = [self._prepare(p) for p in self.episode_dirs]
        self.index = np.array(
            [(e, t) for e, ep in enumerate(self.episodes) for t in range(len(ep))], dtype=np.int64
        ).reshape(-1, 2)  # (samples, 2): (episode, frame)

    # ------------------------------------------------------------------------------------------------ loading
    def _prepare(self, path: Path) -> _PreparedEpisode:
        cfg = self.config
        ep = Episode.load(path)
        missing = [v for v in cfg.view_names if v not in ep.view_names]
        if missing:
            raise ValueError(
                f"episode {path} has views {list(ep.view_names)} but the model config needs "
                f"{list(cfg.view_names)} (missing {missing}); set V4Config.view_names to views the "
                f"episodes have, or re-extract the episodes with those cameras"
            )
        time_base = self.time_base
        index_ok, why_not = frame_indexing_matches_stamps(ep.stamps_ns, cfg.dataset_fps)
        if time_base == "auto":
            time_base = "index" if index_ok else "stamps"
        elif time_base == "index" and not index_ok:
            warnings.warn(
                f"episode {path}: time_base='index' but {why_not}; chunk targets will not be "
                f"frame_stride / dataset_fps apart in time (use time_base='auto' or 'stamps' to resample)",
                stacklevel=2,
            )
        S = cfg.img_size
        images = []
        for v in cfg.view_names:
            cached = self._cache_path(path, v)
            if cached is not None and cached.is_file():
                images.append(np.load(cached, mmap_mode="r", allow_pickle=False))
                continue
            # cv2, scipy, torch: loaded on first use, not on import
            from para_core.model.policy import resize_to_model_input

            resized = np.stack(
                [resize_to_model_input(ep.images[v][i], ep.K[v][i], S)[0] for i in range(len(ep))]
            )  # (n, S, S, 3)
            if cached is not None:
                cached.parent.mkdir(parents=True, exist_ok=True)
                tmp = cached.with_suffix(".tmp.npy")
                np.save(tmp, resized, allow_pickle=False)
                tmp.replace(cached)
                resized = np.load(cached, mmap_mode="r", allow_pickle=False)
            images.append(resized)
        K_img = np.stack(
            [
                np.stack(
                    [
                        ep.K[v][:, 0] * (S / ep.image_size(v)[1]),
                        ep.K[v][:, 1] * (S / ep.image_size(v)[0]),
                        ep.K[v][:, 2],
                    ],
                    axis=1,
                )
                for v in cfg.view_names
            ],
            axis=1,
        )  # (n, N, 3, 3)
        T_world_cam = np.stack([ep.T_world_cam[v] for v in cfg.view_names], axis=1)  # (n, N, 4, 4)
        return _PreparedEpisode(
            path=str(path),
            time_base=time_base,
            stamps_ns=ep.stamps_ns,
            images=images,
            K_img=K_img,
            T_world_cam=T_world_cam,
            T_world_ee=ep.T_world_ee,
            gripper=ep.gripper,
        )

    def _cache_path(self, path: Path, view: str) -> Path | None:
        if self.cache_dir is None:
            return None

        arrays = path / ARRAYS_FILE
        st = arrays.stat()
        key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{self.config.img_size}"
        digest = hashlib.sha1(key.encode()).hexdigest()[:16]
        return self.cache_dir / f"{path.name}-{digest}" / f"{view}_{self.config.img_size}.npy"

    # ------------------------------------------------------------------------------------------------ samples
    def __len__(self) -> int:
        return int(self.index.shape[0])

    @property
    def n_frames_per_episode(self) -> list[int]:
        return [len(ep) for ep in self.episodes]

    def chunk_targets(self, episode: int, t: int):
        """Future chunk and past positions of frame t: (positions (T, 3), rotations (T, 3, 3), gripper (T,),
        past positions (mv_past_n, 3)), float64, following the time-base rule of the class docstring."""
        cfg = self.config
        ep = self.episodes[episode]
        if ep.time_base == "index":
            fut = future_frame_indices(t, len(ep), cfg.n_window, cfg.frame_stride)
            past = past_frame_indices(t, cfg.mv_past_n, cfg.frame_stride)
            return (ep.T_world_ee[fut, :3, 3], ep.T_world_ee[fut, :3, :3], ep.gripper[fut], ep.T_world_ee[past, :3, 3])
        step_ns = cfg.step_dt_s * 1e9
        t0 = int(ep.stamps_ns[t])
        fut_ns = t0 + np.rint(np.arange(cfg.n_window) * step_ns).astype(np.int64)
        past_ns = t0 - np.rint(np.arange(cfg.mv_past_n, 0, -1) * step_ns).astype(np.int64)
        pos, rot, grip = _interp_poses(ep.stamps_ns, ep.T_world_ee, ep.gripper, fut_ns)
        past_pos, _, _ = _interp_poses(ep.stamps_ns, ep.T_world_ee, ep.gripper, past_ns)
        return pos, rot, grip, past_pos

    def _jitter(self, images):
        """Colour jitter on (N, 3, S, S) uint8 -> uint8; factors drawn per view from torch's RNG."""
        import torch  # torch: loaded on first use, not on import

        s = self.jitter_strength
        x = images.float() / 255.0  # (N, 3, S, S)
        n = x.shape[0]
        b, c, sat = (1.0 + s * (2.0 * torch.rand(3, n, 1, 1, 1) - 1.0)).unbind(0)  # (N, 1, 1, 1) each
        x = x * b
        mean = x.mean(dim=(1, 2, 3), keepdim=True)  # (N, 1, 1, 1)
        x = (x - mean) * c + mean
        gray = 0.299 * x[:, 0:1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:3]  # (N, 1, S, S)
        x = (x - gray) * sat + gray
        return (x.clamp(0.0, 1.0) * 255.0).round().to(torch.uint8)

    def __getitem__(self, i: int) -> dict:
        import torch  # torch: loaded on first use, not on import

        e, t = (int(x) for x in self.index[i])
        ep = self.episodes[e]
        views = np.stack([np.asarray(view[t]) for view in ep.images])  # (N, S, S, 3) uint8
        K_img, T_world_cam = ep.K_img[t], ep.T_world_cam[t]  # (N, 3, 3), (N, 4, 4) float64
        aug = self.augmentations
        if aug.active:
            d = augmentation.draw(aug, self.config.view_names, self.config.img_size)
            if aug.zoom_on:
                views = np.stack([augmentation.zoom_image(v, z, o) for v, z, o in zip(views, d.zoom, d.crop_origin_px)])
            K_img = augmentation.told_intrinsics(K_img, d)  # (N, 3, 3) exact zoom, then the told error
            T_world_cam = augmentation.told_poses(T_world_cam, d)  # (N, 4, 4) the told poses
        imgs = torch.from_numpy(views).permute(0, 3, 1, 2).contiguous()  # (N, 3, S, S) uint8
        if self.augment and self.jitter_strength > 0:
            imgs = self._jitter(imgs)
        if aug.appearance_on:
            imgs = augmentation.apply_appearance(imgs, d)
        pos, rot, grip, past = self.chunk_targets(e, t)
        f32 = torch.float32
        return {
            "images": imgs,
            "K_img": torch.as_tensor(K_img, dtype=f32),  # (N, 3, 3)
            "T_world_cam": torch.as_tensor(T_world_cam, dtype=f32),  # (N, 4, 4)
            "T_world_ee": torch.as_tensor(ep.T_world_ee[t], dtype=f32),  # (4, 4)
            "gripper": torch.tensor(float(ep.gripper[t]), dtype=f32),  # ()
            "past_positions_world": torch.as_tensor(past, dtype=f32),  # (mv_past_n, 3)
            "target_positions_world": torch.as_tensor(pos, dtype=f32),  # (T, 3)
            "target_rotations_world": torch.as_tensor(rot, dtype=f32),  # (T, 3, 3)
            "target_gripper": torch.as_tensor(grip, dtype=f32),  # (T,)
            "episode_index": torch.tensor(e),
            "frame_index": torch.tensor(t),
        }


def make_batch(batch: dict, config, device) -> tuple:
    """A collated batch of ``EpisodeDataset`` samples -> (``V4Inputs``, ``V4Targets``) on ``device``.

    Images are ImageNet-normalised here (on the device, like ``Policy.preprocess``); targets are encoded with
    ``para_core.model.actions.encode_targets`` against the voxel grid of the same observations.
    """
    import torch  # torch: loaded on first use, not on import

    from para_core.model.actions import encode_targets  # scipy, torch: loaded on first use, not on import
    from para_core.model.model_io import V4Inputs  # torch: loaded on first use, not on import

    # cv2, scipy, torch: loaded on first use, not on import
    from para_core.model.policy import IMAGENET_MEAN, IMAGENET_STD
    from para_core.model.voxels import build_voxel_grid  # torch: loaded on first use, not on import

    device = torch.device(device)
    mean = torch.tensor(IMAGENET_MEAN, device=device).view(1, 1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD, device=device).view(1, 1, 3, 1, 1)
    images = batch["images"].to(device, non_blocking=True).float() / 255.0  # (B, N, 3, S, S)
    inputs = V4Inputs(
        images=(images - mean) / std,
        K_img=batch["K_img"].to(device),  # (B, N, 3, 3)
        T_world_cam=batch["T_world_cam"].to(device),  # (B, N, 4, 4)
        T_world_ee=batch["T_world_ee"].to(device),  # (B, 4, 4)
        gripper=batch["gripper"].to(device),  # (B,)
        past_positions_world=batch["past_positions_world"].to(device),  # (B, mv_past_n, 3)
    )
    grid = build_voxel_grid(config, inputs.K_img.float(), inputs.T_world_cam.float())
    targets = encode_targets(
        config,
        grid,
        batch["target_positions_world"].to(device),
        batch["target_rotations_world"].double(),
        batch["target_gripper"].double(),
    )
    return inputs, targets
