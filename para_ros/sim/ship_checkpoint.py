"""Copy a finished ``para-train`` run's checkpoint into a shipped checkpoint folder with its recipe and curves.

:func:`ship_checkpoint` writes ``OUT/model.safetensors`` + ``config.json`` (the deployable checkpoint),
``metrics.jsonl``, ``loss_curve.png`` and ``recipe.json``: the demonstrations (command, seeds, count), the model preset
and the train config, the simulator settings the policy was trained under (``sim``: the sim node's shipped camera and
task parameters, checked by ``para-sim eval``), the final validation figures and the command that reproduces it
(``scripts/train_pick_place``). Its command line: ``python -m para_ros.commands.ship_checkpoint``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from para_ros.paths import shipped_node_params

# sim_node parameters a policy depends on: what its cameras see and how the task is laid out.
SIM_KEYS = (
    "image_width",
    "image_height",
    "scene_cam_rate_hz",
    "wrist_cam_rate_hz",
    "scene_cam_fovy_deg",
    "wrist_cam_fovy_deg",
    "scene_cam_position_m",
    "scene_cam_look_at_m",
    "scene_cam_up_hint",
    "n_cubes",
)


def sim_settings() -> dict:
    params = shipped_node_params("config/sim.yaml", "sim_node")
    return {k: params[k] for k in SIM_KEYS}


def demonstration_options(episode_dirs) -> dict:
    """How the demonstrations were drawn beyond the layout seeds, from their ``meta.json``: the scene camera
    and rig randomisation ranges and the cube region (``para-sim demos --randomise-camera`` / ``--randomise-rig`` /
    ``--cube-region``), and the
    init checkpoint is recorded by para-train itself (``train_config.init_from``)."""
    out: dict = {}
    for d in episode_dirs[:1]:
        meta_file = Path(d) / "meta.json"
        if not meta_file.is_file():
            continue
        meta = json.loads(meta_file.read_text()).get("meta", {})
        if "scene_camera" in meta:
            out["scene_camera_randomisation"] = meta["scene_camera"].get("randomisation")
        if "rig" in meta:
            out["rig_randomisation"] = meta["rig"].get("randomisation")
        if "cube_region" in meta:
            out["cube_region"] = meta["cube_region"]
    return out


def _git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            cwd=Path(__file__).resolve().parent,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def ship_checkpoint(
    run: Path,
    out: Path,
    *,
    episodes: int = 0,
    trained_at: str = "",
    reproduce: str = "",
    note: str = "",
    data: str = "",
) -> dict:
    """Write the shipped checkpoint folder ``out`` from the ``para-train`` run directory ``run`` (module docstring).

    Args:
        episodes: demonstrations recorded (the recipe's ``demonstrations.recorded``).
        trained_at: git commit the training ran at ("": the current one).
        reproduce: the command that reproduces it ("": ``scripts/train_pick_place`` with the run's preset).
        note: a remark recorded in the recipe (e.g. why a run stopped early).
        data: the demonstrations folder (the recipe's ``demonstrations.folder``; "": not recorded).

    Returns:
        the recipe written to ``out/recipe.json``.
    """
    # scipy, torch: loaded on first use, not on import
    from para_core.train.trainer import plot_metrics, read_metrics, read_run

    run, out = Path(run), Path(out)
    info = read_run(run)
    metrics = read_metrics(run / "metrics.jsonl")
    val = [m for m in metrics if m.get("split") == "val"]
    out.mkdir(parents=True, exist_ok=True)
    for name in ("model.safetensors", "config.json"):
        shutil.copy2(run / "checkpoint" / name, out / name)
    shutil.copy2(run / "metrics.jsonl", out / "metrics.jsonl")
    plot_metrics(out / "metrics.jsonl", out / "loss_curve.png")
    seeds = sorted(
        int(Path(d).name.split("_")[-1])
        for d in info["train_episodes"] + list(info.get("val_episodes", []))
        if Path(d).name.split("_")[-1].isdigit()
    )
    recipe = {
        "reproduce": reproduce
        or "scripts/train_pick_place"
        + ("" if info["model_config"]["name"] == "pick_place" else f" --preset {info['model_config']['name']}"),
        "demonstrations": {
            "command": "para-sim demos --out DATA --seed S --episodes N (the layout seeds used are "
            "listed; failed expert episodes are not written)",
            "recorded": episodes,
            **({"folder": str(data)} if data else {}),
            "layout_seeds": seeds,
            "episodes_used": len(info["train_episodes"]),
            "validation_episodes": len(info.get("val_episodes", [])),
            **demonstration_options(info["train_episodes"]),
        },
        "preset": info["model_config"]["name"],
        "model_config": info["model_config"],
        "train_config": info["train_config"],
        "init_from": info["train_config"].get("init_from", ""),  # fine-tuned from these weights ("" = from scratch)
        "iterations": val[-1]["iter"] if val else max((m.get("iter", 0) for m in metrics), default=None),
        "final_validation": val[-1] if val else None,
        "sim": sim_settings(),
        "trained_at_commit": trained_at or _git_commit(),
        "note": note,
    }
    trained = run / "checkpoint" / "recipe.json"  # para-train's: the calibrations of its episodes
    if trained.is_file() and "calibrations" in json.loads(trained.read_text()):
        recipe["calibrations"] = json.loads(trained.read_text())["calibrations"]
    (out / "recipe.json").write_text(json.dumps(recipe, indent=2))
    return recipe
