"""Which camera calibrations a policy was trained with, kept in the checkpoint's ``recipe.json``.

``para-bag extract`` stores the ``calibration.yaml`` a recording used next to the episode (``calibration.yaml``) and
in the episode's ``meta.json`` (``meta.calibration``: file name, sha256, content). ``para-train`` gathers them from
its episodes and writes them into ``RUN/checkpoint/recipe.json`` under ``calibrations`` (one entry per distinct file,
with the episodes that used it), so a deployment can be matched to the extrinsics its training data was built with.
"""

from __future__ import annotations

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
        if not isinstance(record, dict) or "sha256" not in record:
            continue
        entry = by_sha.setdefault(record["sha256"], {**record, "episodes": []})
        entry["episodes"].append(Path(d).name)
    return list(by_sha.values())


def write_recipe_calibrations(checkpoint_dir, calibrations: list[dict]) -> Path | None:
    """Merge ``calibrations`` into ``checkpoint_dir/recipe.json`` (created if absent); nothing when there are none."""
    if not calibrations:
        return None
    path = Path(checkpoint_dir) / RECIPE_FILE
    recipe = json.loads(path.read_text()) if path.is_file() else {}
    recipe["calibrations"] = calibrations
    path.write_text(json.dumps(recipe, indent=2))
    return path
