"""A checkpoint directory's format and its ``config.json``, read without torch: what a launcher needs to know of a
policy (its config, its step period) before any process loads the weights (:mod:`para_core.model.checkpoint`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from para_core.model.config import V4Config

FORMAT = "para_checkpoint"
FORMAT_VERSION = 1
WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"


class CheckpointError(ValueError):
    """A checkpoint directory that cannot be loaded; the message names the problem and the fix."""


def read_checkpoint_meta(path: str | Path) -> dict[str, Any]:
    """Parse and check ``config.json`` of a checkpoint directory."""
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(
            f"checkpoint {str(path)!r} is not a directory; pass the directory that holds "
            f"{WEIGHTS_FILE} and {CONFIG_FILE}"
        )
    cfg_file = path / CONFIG_FILE
    if not cfg_file.is_file():
        raise CheckpointError(
            f"checkpoint {str(path)!r} has no {CONFIG_FILE}; it was not written by "
            f"para_core.model.checkpoint.save_checkpoint"
        )
    try:
        meta = json.loads(cfg_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(
            f"{cfg_file} is not valid JSON ({exc}); the file is damaged, re-export the checkpoint"
        ) from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(
            f"{cfg_file} is not a PARA checkpoint config (format={meta.get('format')!r} if a dict, expected {FORMAT!r})"
        )
    if meta.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{cfg_file}: format_version {meta.get('format_version')!r} is not supported "
            f"(this para_core reads {FORMAT_VERSION}); upgrade para_core or re-export"
        )
    return meta


def read_checkpoint_config(path: str | Path, meta: dict[str, Any] | None = None) -> V4Config:
    """The model config of the checkpoint directory ``path`` (``meta``: its :func:`read_checkpoint_meta`, when read
    already). CheckpointError when ``config.json`` is missing, damaged or describes an invalid config."""
    meta = read_checkpoint_meta(path) if meta is None else meta
    try:
        return V4Config.from_dict(meta.get("config", {}))
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {str(path)!r}: its config is invalid: {exc}") from None
