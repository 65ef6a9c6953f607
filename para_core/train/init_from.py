"""Start a training run from a checkpoint's weights (``para-train --init-from CHECKPOINT``): fine-tuning, e.g. a
few demonstrations from a new viewpoint.

Only the weights are taken: the run starts at iteration 0 with a fresh optimizer and its own learning-rate schedule
(warm-up included), data split and seed; ``--resume`` is what continues a run's schedule instead. The checkpoint must
hold the model the run trains: the same model kind, the same preset (``V4Config.name``), the same camera set
(``view_names``, in order) and every other architecture field equal; only the schedule fields
(``para_core.model.config.SCHEDULE_FIELDS`` without ``name``: learning rates, warm-up, iterations, batch size,
weight decay) may differ. A mismatch is refused before anything is written, naming the fields and both values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from para_core.model.checkpoint import WEIGHTS_FILE, CheckpointError, read_checkpoint_meta
from para_core.model.config import SCHEDULE_FIELDS, V4Config

# Fields whose difference a fine-tune may have (the schedule); the preset name is compared on its own.
_BACKBONE_SOURCE = ("backbone_config", "backbone_pretrained_dir")


def saved_config(checkpoint: str | Path) -> V4Config:
    """The model config stored in a checkpoint directory (``config.json``)."""
    meta = read_checkpoint_meta(checkpoint)
    try:
        return V4Config.from_dict(meta.get("config", {}))
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"--init-from {checkpoint}: its config is invalid: {exc}") from None


def check_compatible(saved: V4Config, config: V4Config, checkpoint: str | Path) -> None:
    """Refuse (ValueError) a checkpoint whose model is not the one ``config`` describes, naming the mismatch."""
    where = f"--init-from {checkpoint}"
    if saved.model_kind != config.model_kind:
        raise ValueError(
            f"{where} holds a {saved.model_kind!r} model, this run trains {config.model_kind!r}: "
            f"fine-tune with --preset {saved.name} (or start from a checkpoint of {config.name})"
        )
    if saved.name != config.name:
        raise ValueError(
            f"{where} was trained with preset {saved.name!r}, this run uses {config.name!r}: pass --preset {saved.name}"
        )
    if tuple(saved.view_names) != tuple(config.view_names):
        raise ValueError(
            f"{where} was trained on cameras {list(saved.view_names)}, this run's data has "
            f"{list(config.view_names)}: fine-tune on episodes with the checkpoint's camera set"
        )
    a, b = saved.to_flat_dict(), config.to_flat_dict()
    ignore = set(SCHEDULE_FIELDS)
    if config.backbone_pretrained_dir:  # the weights come from the checkpoint: its saved backbone architecture wins
        ignore |= set(_BACKBONE_SOURCE)
    diff = sorted(k for k in set(a) | set(b) if k not in ignore and a.get(k) != b.get(k))
    if diff:
        shown = "; ".join(f"{k}: checkpoint {a.get(k)!r} vs run {b.get(k)!r}" for k in diff[:6])
        raise ValueError(
            f"{where} has another architecture than this run ({shown}{' ...' if len(diff) > 6 else ''}); "
            f"use the checkpoint's config (only {[f for f in SCHEDULE_FIELDS if f != 'name']} may "
            "differ)"
        )


def build_config(saved: V4Config, config: V4Config) -> V4Config:
    """The config to build the model from: ``config``, with the checkpoint's backbone architecture when ``config``
    names pretrained backbone files (the checkpoint's weights replace them)."""
    if config.backbone_pretrained_dir:
        return config.replace(backbone_config=saved.backbone_config, backbone_pretrained_dir="")
    return config


def load_weights(model, checkpoint: str | Path, device: Any = "cpu") -> None:
    """Copy the checkpoint's tensors into ``model`` (strict: every tensor, every shape)."""
    from safetensors.torch import load_file  # safetensors: loaded on first use, not on import

    weights = Path(checkpoint) / WEIGHTS_FILE
    if not weights.is_file():
        raise CheckpointError(f"--init-from {checkpoint} has no {WEIGHTS_FILE}; copy the complete directory")
    try:
        state = load_file(str(weights), device=str(device))
    except Exception as exc:  # noqa: BLE001 - safetensors raises several kinds; all mean a damaged file
        raise CheckpointError(f"{weights} cannot be read ({exc}); the file is truncated or corrupt") from None
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise CheckpointError(
            f"--init-from {checkpoint}: its weights do not fit the model ({exc}); the weights "
            "and config.json come from different models"
        ) from None
