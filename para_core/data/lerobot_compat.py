"""Import LeRobot's dataset classes (``lerobot.datasets``) whether or not a working torchvision is installed.

LeRobot 0.4's dataset modules import torchvision at module level for two small things: ``transforms.ToTensor`` (PIL
image features) and ``io.VideoReader`` (its ``"pyav"`` video decoding path). PyPI's torchvision wheels for Linux are
CUDA builds: next to a CPU-only PyTorch they fail at import (``operator torchvision::nms does not exist``). So when
``import torchvision`` fails, a stand-in module with exactly those two pieces is registered under the name
``torchvision`` before LeRobot is imported: ``ToTensor`` (PIL/uint8 HWC -> float32 CHW in [0, 1], torchvision's
semantics) and a PyAV ``VideoReader`` (seek to the key frame at or before a time, then yield ``{"data": (3, H, W)
uint8, "pts": seconds}`` per decoded frame, torchvision's pyav behaviour). With a working torchvision (a CUDA PyTorch)
the real one is used. Decoding then goes through LeRobot's own ``decode_video_frames(..., backend="pyav")``. The
stand-in is in ``sys.modules`` only while LeRobot is imported: transformers and datasets never see it.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import sys
import types

import numpy as np

LEROBOT_INSTALL_HINT = (
    "pip install -r requirements-data.txt -c constraints.txt && pip install --no-deps "
    "lerobot==0.4.4 (scripts/setup does both)"
)


class _ToTensor:
    """torchvision.transforms.ToTensor: PIL image or (H, W, C) uint8 array -> (C, H, W) float32 in [0, 1]."""

    def __call__(self, pic):
        import torch  # torch: loaded on first use, not on import

        arr = np.asarray(pic)
        if arr.ndim == 2:
            arr = arr[:, :, None]
        tensor = torch.from_numpy(np.ascontiguousarray(arr)).permute(2, 0, 1)  # (C, H, W)
        return tensor.float().div(255.0) if tensor.dtype == torch.uint8 else tensor.float()


class _PyAVVideoReader:
    """torchvision.io.VideoReader(path, "video") with the pyav backend: ``seek(t)`` then iterate decoded frames."""

    def __init__(self, path: str, stream: str = "video"):
        import av  # av (PyAV, optional: requirements-data.txt): loaded on first use, not on import

        if stream != "video":
            raise ValueError(f"VideoReader stream={stream!r}: only 'video' is supported here")
        self.container = av.open(str(path))
        self._stream = self.container.streams.video[0]
        self._frames = None

    def seek(self, time_s: float, keyframes_only: bool = True) -> _PyAVVideoReader:
        tb = self._stream.time_base
        self.container.seek(int(time_s / tb), stream=self._stream, backward=True, any_frame=not keyframes_only)
        self._frames = self.container.decode(self._stream)
        return self

    def __iter__(self):
        import torch  # torch: loaded on first use, not on import

        frames = self._frames if self._frames is not None else self.container.decode(self._stream)
        for frame in frames:
            rgb = frame.to_ndarray(format="rgb24")  # (H, W, 3) uint8
            yield {"data": torch.from_numpy(rgb).permute(2, 0, 1).contiguous(), "pts": float(frame.time)}


def _torchvision_stand_in() -> types.ModuleType:
    tv = types.ModuleType("torchvision")
    tv.__doc__ = "para_core stand-in: ToTensor and a PyAV VideoReader (no working torchvision is installed)"
    tv.__para_stand_in__ = True
    transforms = types.ModuleType("torchvision.transforms")
    transforms.ToTensor = _ToTensor
    io = types.ModuleType("torchvision.io")
    io.VideoReader = _PyAVVideoReader
    backend = {"name": "pyav"}

    def set_video_backend(name: str) -> None:
        if name != "pyav":
            raise ValueError(f"video backend {name!r} needs the real torchvision; use 'pyav'")
        backend["name"] = name

    for module in (tv, transforms, io):  # a spec, so that importlib.util.find_spec("torchvision") works
        module.__spec__ = importlib.machinery.ModuleSpec(module.__name__, None)
    tv.transforms, tv.io, tv.set_video_backend = transforms, io, set_video_backend
    tv.get_video_backend = lambda: backend["name"]
    return tv


@contextlib.contextmanager
def _torchvision_for_lerobot():
    """While LeRobot's modules are imported, ``torchvision`` is the real one or the stand-in. The stand-in leaves
    ``sys.modules`` afterwards (LeRobot's modules keep their reference), so that other libraries in the process
    (transformers, datasets) still see no torchvision instead of a partial one."""
    if "torchvision" in sys.modules or "lerobot.datasets.lerobot_dataset" in sys.modules:
        yield
        return
    try:
        importlib.import_module("torchvision")
        yield
        return
    except Exception:  # noqa: BLE001 - absent, or a CUDA build next to a CPU torch (RuntimeError at import)
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
    import datasets  # noqa: F401 - first, so that its own torchvision check sees the truth (none)

    tv = _torchvision_stand_in()
    names = {"torchvision": tv, "torchvision.transforms": tv.transforms, "torchvision.io": tv.io}
    sys.modules.update(names)
    try:
        yield
    finally:
        for name, module in names.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]


def lerobot_dataset_classes():
    """-> (LeRobotDataset, LeRobotDatasetMetadata, CODEBASE_VERSION) from the installed LeRobot library.

    Raises ``ImportError`` naming the install command when LeRobot or its dataset dependencies are missing."""
    try:
        with _torchvision_for_lerobot():
            # lerobot (optional: requirements-data.txt)
            from lerobot.datasets.lerobot_dataset import CODEBASE_VERSION, LeRobotDataset, LeRobotDatasetMetadata
    except ImportError as exc:
        raise ImportError(
            f"the LeRobot dataset library is not importable ({exc}); install it with: {LEROBOT_INSTALL_HINT}"
        ) from exc
    return LeRobotDataset, LeRobotDatasetMetadata, CODEBASE_VERSION


def video_backend() -> str:
    """The decoder LeRobotDataset should use here: torchcodec when it imports (it needs FFmpeg's shared
    libraries), else LeRobot's ``"pyav"`` path."""
    try:
        importlib.import_module("torchcodec.decoders")
        return "torchcodec"
    except Exception:  # noqa: BLE001 - absent, or its FFmpeg libraries are missing
        return "pyav"


def open_lerobot_dataset(root, repo_id: str = "local/para_export"):
    """LeRobot's ``LeRobotDataset`` of the directory ``root``, opened through :func:`lerobot_dataset_classes` (so it
    works without torchvision) with the video decoder that works here (:func:`video_backend`). ``repo_id`` is a name
    only; nothing is downloaded."""
    LeRobotDataset, _, _ = lerobot_dataset_classes()
    return LeRobotDataset(repo_id, root=str(root), video_backend=video_backend())


def open_line(root, repo_id: str = "local/para_export") -> str:
    """One line of Python that opens the dataset at ``root`` in this package's environment (what the export prints:
    ``lerobot.datasets.lerobot_dataset.LeRobotDataset`` itself needs torchvision at import)."""
    return (
        "from para_core.data.lerobot_compat import open_lerobot_dataset; "
        f"ds = open_lerobot_dataset({str(root)!r}, repo_id={repo_id!r})"
    )
