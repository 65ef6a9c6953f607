"""Checkpoints as a directory: ``model.safetensors`` (weights) + ``config.json`` (kind, full config, versions).

``config.json``::

    {"format": "para_checkpoint", "format_version": 1, "model_kind": "para_v4", "model_id": "...",
     "config": {...V4Config.to_dict()...}, "versions": {"para_core": ..., "torch": ..., "transformers": ...,
     "safetensors": ...}, "extra": {...}}

The saved config is self-contained: when the backbone came from a pretrained directory, the architecture actually
built is written to ``backbone_config`` and ``backbone_pretrained_dir`` is cleared, so loading needs no other files. Nothing is ever unpickled (no ``torch.load``, no ``pickle``): weights go through ``safetensors`` only.
Every failure (missing file, bad JSON, wrong format or kind, truncated/corrupt weights, missing / unexpected tensors,
shape mismatches) raises ``CheckpointError`` (a ValueError) that says what is wrong and what to do.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from para_core import __version__
from para_core.model.checkpoint_files import (  # noqa: F401 (re-exported: the checkpoint format's names)
    CONFIG_FILE,
    FORMAT,
    FORMAT_VERSION,
    WEIGHTS_FILE,
    CheckpointError,
    read_checkpoint_config,
    read_checkpoint_meta,
)
from para_core.model.config import V4Config
from para_core.model.file_modes import normal_file_mode
from para_core.model.registry import MODEL_REGISTRY, build_model


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version  # the installed versions, without importing them

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return {
        "para_core": __version__,
        "torch": torch.__version__,
        "transformers": installed("transformers"),
        "safetensors": installed("safetensors"),
    }


def save_checkpoint(
    path: str | Path,
    model: nn.Module,
    config: V4Config | None = None,
    model_id: str = "",
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write ``model`` (and its config) to directory ``path`` (created if needed). Returns the directory."""
    from safetensors.torch import save_file  # safetensors: loaded on first use, not on import

    config = config or model.config
    backbone = getattr(model, "backbone", None)
    if config.backbone_pretrained_dir and backbone is not None and hasattr(backbone, "arch_config"):
        config = config.replace(backbone_config=backbone.arch_config(), backbone_pretrained_dir="")
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(path / WEIGHTS_FILE), metadata={"format": FORMAT, "model_kind": config.model_kind})
    os.chmod(path / WEIGHTS_FILE, normal_file_mode())  # safetensors writes 0600; a checkpoint is shared and copied
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model_kind": config.model_kind,
        "model_id": model_id or f"{config.model_kind}:{path.name}",
        "config": config.to_dict(),
        "versions": _versions(),
        "extra": extra or {},
    }
    (path / CONFIG_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True))
    return path


def load_checkpoint(
    path: str | Path, expected_kind: str | None = None, map_location: str = "cpu"
) -> tuple[nn.Module, V4Config, dict[str, Any]]:
    """Load a checkpoint directory -> (model in eval mode, config, metadata).

    :param expected_kind: if given, the checkpoint's ``model_kind`` must equal it.
    """
    from safetensors import SafetensorError  # safetensors: loaded on first use, not on import
    from safetensors.torch import load_file

    path = Path(path)
    meta = read_checkpoint_meta(path)
    kind = meta.get("model_kind")
    if expected_kind is not None and kind != expected_kind:
        raise CheckpointError(
            f"checkpoint {str(path)!r} holds model_kind {kind!r}, but {expected_kind!r} was "
            f"requested; load it with the matching kind"
        )
    if kind not in MODEL_REGISTRY:
        raise CheckpointError(
            f"checkpoint {str(path)!r} has model_kind {kind!r}, which this para_core does not "
            f"know (registered: {sorted(MODEL_REGISTRY)})"
        )
    config = read_checkpoint_config(path, meta)
    if config.model_kind != kind:
        raise CheckpointError(
            f"checkpoint {str(path)!r}: config.model_kind {config.model_kind!r} disagrees with "
            f"model_kind {kind!r}; the config.json was edited by hand, fix one of them"
        )
    weights = path / WEIGHTS_FILE
    if not weights.is_file():
        raise CheckpointError(f"checkpoint {str(path)!r} has no {WEIGHTS_FILE}; copy the complete directory")
    try:
        state = load_file(str(weights), device=map_location)
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise CheckpointError(
            f"{weights} cannot be read ({exc}); the file is truncated or corrupt, copy it again"
        ) from None
    model = build_model(config)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    mismatched = [
        f"{k}: checkpoint {tuple(state[k].shape)} vs model {tuple(expected[k].shape)}"
        for k in sorted(set(state) & set(expected))
        if state[k].shape != expected[k].shape
    ]
    problems = []
    if missing:
        problems.append(f"{len(missing)} missing tensor(s): {missing[:8]}{' ...' if len(missing) > 8 else ''}")
    if unexpected:
        problems.append(
            f"{len(unexpected)} unexpected tensor(s): {unexpected[:8]}{' ...' if len(unexpected) > 8 else ''}"
        )
    if mismatched:
        problems.append(f"{len(mismatched)} shape mismatch(es): {mismatched[:8]}")
    if problems:
        raise CheckpointError(
            f"checkpoint {str(path)!r} does not match the model its config describes: "
            + "; ".join(problems)
            + ". The weights and config.json come from different models; re-export the checkpoint"
        )
    model.load_state_dict(state, strict=True)
    return model.eval(), config, meta
