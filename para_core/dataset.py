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
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

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
        raise _err(field_name, f"non-finite value (NaN/inf) at index {tuple(int(i) for i in bad)}",
                   "drop or repair that frame before building the episode")


def _as_float64(field_name: str, value: Any, shape: tuple) -> np.ndarray:
    """Convert to float64 and check the shape; ``None`` entries in ``shape`` match any size."""
    array = np.asarray(value)
    if array.dtype == object or not (np.issubdtype(array.dtype, np.floating)
                                     or np.issubdtype(array.dtype, np.integer)):
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
        raise _err(field_name, f"frame {i} is not a homogeneous transform (last row {last[i].tolist()})",
                   "pass 4x4 matrices whose last row is [0, 0, 0, 1]")
    R = T[:, :3, :3]
    err = np.abs(np.einsum("nij,nkj->nik", R, R) - np.eye(3)).max(axis=(1, 2))  # (N,)
    det = np.linalg.det(R)  # (N,)
    bad = np.nonzero((err > 1e-3) | (det < 0))[0]
    if bad.size:
        i = int(bad[0])
        raise _err(field_name, f"frame {i} has a rotation block that is not a proper rotation "
                               f"(|R R^T - I| = {err[i]:.2e}, det = {det[i]:.3f})",
                   "orthonormalise the rotation (e.g. from a unit quaternion) before saving")


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
            raise _err("view_names", f"got the string {self.view_names!r}",
                       'pass a tuple of names, e.g. ("scene", "wrist")')
        self.view_names = tuple(str(v) for v in self.view_names)
        if not self.view_names:
            raise _err("view_names", "is empty", "name at least one camera view")
        if len(set(self.view_names)) != len(self.view_names):
            raise _err("view_names", f"{self.view_names} has duplicates", "use distinct view names")
        for v in self.view_names:
            if not _VIEW_NAME_RE.match(v):
                raise _err("view_names", f"{v!r} has characters other than letters, digits, '_' and '-'",
                           "rename the view (it becomes part of an array name on disk)")

        stamps = np.asarray(self.stamps_ns)
        if stamps.ndim != 1 or stamps.shape[0] < 1:
            raise _err("stamps_ns", f"shape {stamps.shape} is not (N,) with N >= 1", "pass one stamp per frame")
        if not np.issubdtype(stamps.dtype, np.integer):
            raise _err("stamps_ns", f"dtype {stamps.dtype} is not an integer type",
                       "pass int64 nanoseconds (e.g. sec * 1_000_000_000 + nanosec)")
        self.stamps_ns = stamps.astype(np.int64, copy=False)
        n = int(self.stamps_ns.shape[0])
        steps = np.diff(self.stamps_ns)
        if np.any(steps <= 0):
            i = int(np.nonzero(steps <= 0)[0][0])
            raise _err("stamps_ns", f"not strictly increasing at frame {i + 1} "
                                    f"({int(self.stamps_ns[i])} -> {int(self.stamps_ns[i + 1])} ns)",
                       "sort the frames by time and drop duplicates")

        if isinstance(self.fps, bool) or not isinstance(self.fps, (int, float, np.floating, np.integer)) \
                or not math.isfinite(float(self.fps)) or float(self.fps) <= 0:
            raise _err("fps", f"{self.fps!r} is not a positive finite number", "pass the frame rate in Hz, e.g. 30.0")
        self.fps = float(self.fps)

        for name in ("images", "K", "T_world_cam"):
            mapping = getattr(self, name)
            if not isinstance(mapping, dict):
                raise _err(name, f"is a {type(mapping).__name__}", "pass a dict view name -> array")
            if set(mapping) != set(self.view_names):
                raise _err(name, f"has views {sorted(mapping)} but view_names is {list(self.view_names)}",
                           "give exactly one array per view")

        images = {}
        for v in self.view_names:
            img = np.asarray(self.images[v])
            if img.dtype != np.uint8:
                raise _err(f"images[{v!r}]", f"dtype {img.dtype} is not uint8",
                           "store 8-bit RGB images (convert with np.clip(x, 0, 255).astype(np.uint8))")
            if img.ndim != 4 or img.shape[0] != n or img.shape[3] != 3 or img.shape[1] < 1 or img.shape[2] < 1:
                raise _err(f"images[{v!r}]", f"shape {img.shape} does not match (N={n}, H, W, 3)",
                           "pass one RGB image per frame")
            images[v] = img
        self.images = images
        self.K = {v: _as_float64(f"K[{v!r}]", self.K[v], (n, 3, 3)) for v in self.view_names}
        for v in self.view_names:
            K = self.K[v]
            if not (np.all(K[:, 0, 0] > 0) and np.all(K[:, 1, 1] > 0)
                    and np.allclose(K[:, 2, :], np.array([0.0, 0.0, 1.0]))):
                raise _err(f"K[{v!r}]", "is not a pinhole intrinsics matrix (fx, fy > 0, last row [0, 0, 1])",
                           "pass the CameraInfo K of the images (reshaped to 3x3)")
        self.T_world_cam = {v: _as_float64(f"T_world_cam[{v!r}]", self.T_world_cam[v], (n, 4, 4))
                            for v in self.view_names}
        for v in self.view_names:
            _check_homogeneous(f"T_world_cam[{v!r}]", self.T_world_cam[v])
        self.T_world_ee = _as_float64("T_world_ee", self.T_world_ee, (n, 4, 4))
        _check_homogeneous("T_world_ee", self.T_world_ee)
        self.gripper = _as_float64("gripper", self.gripper, (n,))
        if np.any(self.gripper < -1e-6) or np.any(self.gripper > 1 + 1e-6):
            i = int(np.nonzero((self.gripper < -1e-6) | (self.gripper > 1 + 1e-6))[0][0])
            raise _err("gripper", f"frame {i} has {self.gripper[i]!r}, outside [0, 1]",
                       "normalise the opening to 0 closed .. 1 open")
        self.gripper = np.clip(self.gripper, 0.0, 1.0)

        if not isinstance(self.meta, dict):
            raise _err("meta", f"is a {type(self.meta).__name__}", "pass a JSON-able dict")
        try:
            json.dumps(self.meta)
        except (TypeError, ValueError) as exc:
            raise _err("meta", f"is not JSON-serialisable ({exc})",
                       "use only str/int/float/bool/None/list/dict values") from exc

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
            "stamps_ns": self.stamps_ns, "T_world_ee": self.T_world_ee, "gripper": self.gripper,
        }
        for v in self.view_names:
            arrays[f"images.{v}"] = self.images[v]
            arrays[f"K.{v}"] = self.K[v]
            arrays[f"T_world_cam.{v}"] = self.T_world_cam[v]
        header = {
            "format": EPISODE_FORMAT, "version": EPISODE_VERSION, "view_names": list(self.view_names),
            "fps": self.fps, "n_frames": len(self),
            "image_sizes": {v: list(self.image_size(v)) for v in self.view_names}, "meta": self.meta,
        }
        # Write the arrays first, the header last: a directory with meta.json is a complete episode.
        tmp = directory / (ARRAYS_FILE + ".tmp.npz")
        np.savez_compressed(tmp, **arrays)
        tmp.replace(directory / ARRAYS_FILE)
        (directory / META_FILE).write_text(json.dumps(header, indent=2, sort_keys=True))
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> "Episode":
        """Read an episode directory written by ``save``; never unpickles (``allow_pickle=False``)."""
        directory = Path(directory)
        meta_path, arrays_path = directory / META_FILE, directory / ARRAYS_FILE
        if not meta_path.is_file() or not arrays_path.is_file():
            raise FileNotFoundError(
                f"{directory} is not a PARA episode directory (needs {META_FILE} and {ARRAYS_FILE}); "
                f"write episodes with para_core.dataset.Episode.save or the bag extractor")
        try:
            header = json.loads(meta_path.read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"{meta_path}: not valid JSON ({exc}); re-export the episode") from exc
        if not isinstance(header, dict) or header.get("format") != EPISODE_FORMAT:
            raise ValueError(f"{meta_path}: 'format' is {header.get('format') if isinstance(header, dict) else None!r}"
                             f", expected {EPISODE_FORMAT!r}; this is not a PARA episode")
        if header.get("version") != EPISODE_VERSION:
            raise ValueError(f"{meta_path}: episode format version {header.get('version')!r} is not supported "
                             f"(this code reads version {EPISODE_VERSION}); re-export with a matching version")
        view_names = tuple(header.get("view_names", ()))
        try:
            with np.load(arrays_path, allow_pickle=False) as npz:
                keys = set(npz.files)
                needed = {"stamps_ns", "T_world_ee", "gripper"} | {
                    f"{kind}.{v}" for v in view_names for kind in ("images", "K", "T_world_cam")}
                missing = sorted(needed - keys)
                if missing:
                    raise ValueError(f"{arrays_path}: missing array(s) {missing}; re-export the episode")
                data = {k: npz[k] for k in sorted(needed)}
        except ValueError as exc:
            if "allow_pickle" in str(exc) or "Object arrays" in str(exc):
                raise ValueError(
                    f"{arrays_path} holds pickled object arrays; refusing to unpickle a data file (it could run "
                    f"arbitrary code). Re-export the episode with plain numeric arrays (Episode.save)") from exc
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
