"""Which camera calibrations a policy was trained with, kept in the checkpoint's ``recipe.json``.

``para-bag extract`` stores the ``calibration.yaml`` a recording used next to the episode (``calibration.yaml``) and
in the episode's ``meta.json`` (``meta.calibration``: file name, sha256, content). ``para-train`` gathers them from
its episodes and writes them into ``RUN/checkpoint/recipe.json`` under ``calibrations`` (one entry per distinct file,
with the episodes that used it), so a deployment can be matched to the extrinsics its training data was built with.
``para-bag import-lerobot`` writes the same record (the calibration file's, or for an export of this package the
calibration its ``meta/info.json`` holds: :func:`lerobot_export_record`); episodes that ``para-train --data DATASET``
converted from such an export (``meta.calibration == "features"``) take it from their ``meta.source_lerobot``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

RECIPE_FILE = "recipe.json"


def episode_calibrations(episode_dirs) -> list[dict]:
    """Distinct calibrations of ``episode_dirs`` (by sha256): ``{sha256, file, content, episodes}``; [] if none."""
    by_sha: dict[str, dict] = {}
    for d in episode_dirs:
        meta_path = Path(d) / "meta.json"
        try:
            meta = json.loads(meta_path.read_text()).get("meta") or {}
        except (OSError, ValueError):
            continue
        record = meta.get("calibration")
        if record == "features" and meta.get("source_lerobot"):
            record = lerobot_export_record(meta["source_lerobot"])
        if not isinstance(record, dict) or "sha256" not in record:
            continue
        entry = by_sha.setdefault(record["sha256"], {**record, "episodes": []})
        entry["episodes"].append(Path(d).name)
    return list(by_sha.values())


def lerobot_export_record(dataset) -> dict | None:
    """The calibration record of a LeRobot export of this package: ``meta/info.json``'s ``para.calibration`` (the
    calibration file's content, or the camera poses found in the data) with the sha256 of that content as canonical
    JSON, plus ``para.wrist_mount`` when present; None when the dataset holds none."""
    try:
        para = json.loads((Path(dataset) / "meta" / "info.json").read_text()).get("para") or {}
    except (OSError, ValueError):
        return None
    content = para.get("calibration")
    if not isinstance(content, dict):
        return None
    record = {
        "file": "meta/info.json para.calibration",
        "sha256": hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest(),
        "content": content,
        "source": str(Path(dataset).resolve()),
    }
    if para.get("wrist_mount") is not None:
        record["wrist_mount"] = para["wrist_mount"]
    return record


def write_recipe_calibrations(checkpoint_dir, calibrations: list[dict]) -> Path | None:
    """Merge ``calibrations`` into ``checkpoint_dir/recipe.json`` (created if absent); nothing when there are none."""
    if not calibrations:
        return None
    path = Path(checkpoint_dir) / RECIPE_FILE
    recipe = json.loads(path.read_text()) if path.is_file() else {}
    recipe["calibrations"] = calibrations
    path.write_text(json.dumps(recipe, indent=2))
    return path
