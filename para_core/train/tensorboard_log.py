"""TensorBoard event files of a training run, next to ``metrics.jsonl`` (``RUN/tensorboard/``).

Scalars: every numeric field of each ``metrics.jsonl`` record as ``<split>/<field>`` (train: the loss terms by part,
``lr``, ``grad_norm``, ``samples_per_s``; val: the losses, ``pos_err_m``, ``pos_err_last_m`` and the error of every
horizon step ``pos_err_step<i>_m``), and the learning rate of each optimizer group as ``lr/<group>``. Images:
``val/overlay_<k>``, a few validation scene images with the ground-truth path (green) and the predicted one (red).

Watch a run with ``tensorboard --logdir RUN/tensorboard`` (or the parent folder of several runs). Written with
``torch.utils.tensorboard`` (needs the ``tensorboard`` package); ``para-train --no-tensorboard`` skips it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from para_core.eval.projection import project_points

TB_DIR = "tensorboard"


class TensorBoardLog:
    """A ``SummaryWriter`` with the run's naming rules (see the module docstring)."""

    def __init__(self, run_dir: str | Path, purge_step: int | None = None):
        try:
            from torch.utils.tensorboard import SummaryWriter  # torch: loaded on first use, not on import
        except ImportError as exc:  # pragma: no cover - tensorboard is in requirements.txt
            raise ImportError(
                "para-train writes TensorBoard event files and needs the 'tensorboard' package "
                "(pip install tensorboard); or pass --no-tensorboard"
            ) from exc
        self.path = Path(run_dir) / TB_DIR
        # purge_step: a resumed run drops events after the iteration it resumes from (no lost work logged twice)
        self.writer = SummaryWriter(log_dir=str(self.path), purge_step=purge_step)

    def record(self, record: dict) -> None:
        """One ``metrics.jsonl`` record (has ``split`` and ``iter``) as scalars."""
        split, it = record.get("split", "train"), int(record["iter"])
        for key, value in record.items():
            if key in ("split", "iter") or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if np.isfinite(value):
                self.writer.add_scalar(f"{split}/{key}", float(value), it)

    def learning_rates(self, iteration: int, param_groups) -> None:
        for i, g in enumerate(param_groups):
            self.writer.add_scalar(f"lr/{g.get('name', i)}", float(g["lr"]), iteration)

    def image(self, tag: str, iteration: int, image_hwc: np.ndarray) -> None:
        self.writer.add_image(tag, np.ascontiguousarray(image_hwc), iteration, dataformats="HWC")

    def close(self) -> None:
        self.writer.flush()
        self.writer.close()


def overlay_paths(
    image_chw_uint8,
    K: np.ndarray,
    T_world_cam: np.ndarray,
    gt_world: np.ndarray,
    pred_world: np.ndarray,
    scale: int = 2,
) -> np.ndarray:
    """(H, W, 3) uint8: a model-input image (3, S, S) upscaled ``scale`` x with the GT path (green) and the predicted
    path (red) projected with its K (para_core pixel convention) and camera pose."""
    import cv2  # cv2: loaded on first use, not on import

    img = np.ascontiguousarray(np.asarray(image_chw_uint8).transpose(1, 2, 0))
    img = cv2.resize(img, (img.shape[1] * scale, img.shape[0] * scale), interpolation=cv2.INTER_NEAREST)
    for path, colour in ((gt_world, (0, 220, 0)), (pred_world, (255, 40, 40))):
        uv, _ = project_points(np.asarray(path, dtype=np.float64), K, T_world_cam)  # uv NaN where not in front
        pts = [(int(round((u - 0.5) * scale)), int(round((v - 0.5) * scale))) for u, v in uv if np.isfinite(u)]
        for a, b in zip(pts[:-1], pts[1:]):
            cv2.line(img, a, b, colour, 1, cv2.LINE_AA)
        for p in pts:
            cv2.circle(img, p, 2, colour, -1, cv2.LINE_AA)
    return img
