"""How good a calibration PARA needs: closed-loop success against the error of the scene camera's extrinsics.

The scene camera is rendered at one pose and the graph is told another, wrong by a known amount, so the policy's voxel
grid and its projections are off exactly as they would be with an imperfect calibration. Two ways:

- without ``--calibration`` (the simulator): the camera is rendered offset from the simulator's nominal pose by the
  error (``sim_node scene_cam_true_offset_xyz_m`` / ``_rpy_deg``, in its optical frame) while TF tells the nominal
  pose; the same settings as ``para-sim suite``'s ``told_extrinsics_*`` conditions;
- with ``--calibration FILE`` (a solved file of the rig): the graph is told that file's pose with the error added
  (``sim_node scene_cam_tf:=calibration``) while the camera is rendered at the simulator's truth.

The first renders the camera off the told pose by the error, the second tells a pose off the rendered one by it: the
same error, of the opposite sign.

For each error and each checkpoint the script runs ``para-sim eval`` on the same held-out seeds (a run whose report
is complete is kept, so a stopped run continues) and writes a table (``sensitivity.md`` / ``.json``, a column per
checkpoint) and a plot (``sensitivity.png``, a line per checkpoint) of the success rate with its 95 % Wilson interval.

The errors are applied in the camera's own optical frame: a translation along its x axis (the image's horizontal
direction, the direction that moves projections most) and a rotation about its x axis (a tilt, which moves the
ray's footprint on the table along the line of sight). Both are stated in the output.

Usage::

    python bench/calibration_sensitivity.py --checkpoint robust=checkpoints/pick_place_robust,fixed=checkpoints/pick_place \
        --out runs/sensitivity --translation-mm 0,5,10,20 --rotation-deg 1,2 --episodes 30 \
        --eval-arg=--lockstep --eval-arg=--node-param --eval-arg=chunk_executor:lockstep_latency_s:=0.2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from para_core.calibration.calibration_file import CalibrationFile, load_calibration, save_calibration
from para_core.model.rotations import matrix_to_quaternion, quaternion_to_matrix


def perturbed_scene_camera(cal: CalibrationFile, translation_m: float, rotation_deg: float) -> CalibrationFile:
    """A copy of ``cal`` whose scene camera is moved ``translation_m`` along and turned ``rotation_deg`` about its own
    optical x axis (``T_base_cam' = T_base_cam @ T_err``)."""
    cam = cal.camera("scene_cam")
    T_base_cam = cam.T_parent_child()  # (4, 4)
    angle = np.radians(rotation_deg)
    T_err = np.eye(4)
    T_err[:3, :3] = [[1, 0, 0], [0, np.cos(angle), -np.sin(angle)], [0, np.sin(angle), np.cos(angle)]]
    T_err[0, 3] = translation_m
    T_new = T_base_cam @ T_err
    q_xyzw = matrix_to_quaternion(T_new[:3, :3])
    assert np.allclose(quaternion_to_matrix(q_xyzw), T_new[:3, :3], atol=1e-9)
    moved = replace(
        cam, xyz_m=tuple(float(v) for v in T_new[:3, 3]), quat_xyzw=tuple(float(v) for v in q_xyzw), residuals=None
    )
    cameras = dict(cal.cameras)
    cameras["scene_cam"] = moved
    return replace(cal, cameras=cameras)


def rendered_offset_params(translation_m: float, rotation_deg: float) -> list[str]:
    """``para-sim eval`` arguments that render the scene camera ``translation_m`` along and ``rotation_deg`` about its
    own optical x axis from the pose the graph is told (the simulator's nominal one)."""
    return [
        "--node-param",
        f"sim_node:scene_cam_true_offset_xyz_m:=[{translation_m!r},0.0,0.0]",
        "--node-param",
        f"sim_node:scene_cam_true_offset_rpy_deg:=[{rotation_deg!r},0.0,0.0]",
    ]


def told_calibration_params(cal_path: Path) -> list[str]:
    """``para-sim eval`` arguments that tell the graph the scene camera pose of ``cal_path`` (rendered: the truth)."""
    return [
        "--node-param",
        "sim_node:scene_cam_tf:=calibration",
        "--node-param",
        "sim_node:wrist_cam_tf:=truth",
        "--node-param",
        f"sim_node:calibration_file:={cal_path.resolve()}",
    ]


def point_label(translation_m: float, rotation_deg: float) -> str:
    return f"t{translation_m * 1000:g}mm_r{rotation_deg:g}deg"


def point_text(row: dict) -> str:
    if row["rotation_deg"] == 0:
        return f"{row['translation_mm']:g} mm along x"
    return f"{row['rotation_deg']:g} deg about x"


def para_sim_command() -> list[str]:
    """The ``para-sim`` console script of this environment."""
    here = Path(sys.executable).parent / "para-sim"
    found = str(here) if here.exists() else shutil.which("para-sim")
    if not found:
        raise SystemExit("calibration_sensitivity: 'para-sim' not found; run scripts/setup and activate .venv")
    return [found]


def read_summary(report_json: Path) -> dict:
    """The ``summary`` of a ``para-sim eval`` report (episodes, successes, wilson95, outcomes)."""
    return json.loads(report_json.read_text())["summary"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--calibration",
        default=None,
        help="a solved calibration.yaml whose scene_cam is the told pose to perturb; default: none, the simulator's "
        "nominal pose is told and the camera rendered off it",
    )
    p.add_argument("--out", required=True, help="output directory (one eval per point, the table and the plot)")
    p.add_argument(
        "--checkpoint",
        default="checkpoints/pick_place_robust",
        help="checkpoint directory, or LABEL=DIR[,LABEL=DIR...] to draw several side by side on the same seeds",
    )
    p.add_argument("--translation-mm", default="0,5,10,20", help="translation errors along the camera's x axis (mm)")
    p.add_argument("--rotation-deg", default="1,2,5", help="rotation errors about the camera's x axis (deg)")
    p.add_argument("--episodes", type=int, default=30)
    p.add_argument("--seed", type=int, default=100000)
    p.add_argument("--eval-arg", action="append", default=[], help="extra argument for para-sim eval (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="write the calibration files, print the commands, run none")
    return p


def run_point(cmd: list[str], run_dir: Path, episodes: int, dry_run: bool) -> dict | None:
    """Run one eval unless its report is complete; its summary (None: no report)."""
    if dry_run:
        return None
    if not (run_dir / "report.json").exists() or read_summary(run_dir / "report.json")["episodes"] < episodes:
        subprocess.run(cmd, check=False, env=os.environ.copy())
    if not (run_dir / "report.json").exists():
        print(f"  no report in {run_dir}", flush=True)
        return None
    return read_summary(run_dir / "report.json")


def main(argv: list[str] | None = None) -> int:
    from para_ros.commands.sim_sweep import parse_checkpoints  # the one LABEL=DIR reading of the commands

    args = build_parser().parse_args(argv)
    try:
        checkpoints = parse_checkpoints(args.checkpoint)
    except ValueError as err:
        raise SystemExit(f"calibration_sensitivity: {err}") from None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = load_calibration(args.calibration) if args.calibration else None
    points = [(float(t) / 1000.0, 0.0) for t in args.translation_mm.split(",") if t.strip()]
    points += [(0.0, float(r)) for r in args.rotation_deg.split(",") if r.strip()]
    rows = []
    for i, (t_m, r_deg) in enumerate(points):
        label = point_label(t_m, r_deg)
        if base is not None:
            cal_path = out / f"calibration_{label}.yaml"
            save_calibration(perturbed_scene_camera(base, t_m, r_deg), cal_path, force=True)
            error_args = told_calibration_params(cal_path)
        else:
            error_args = rendered_offset_params(t_m, r_deg)
        row = {"translation_mm": t_m * 1000, "rotation_deg": r_deg, "checkpoints": {}}
        for name, checkpoint in checkpoints:
            run_dir = out / name / label
            cmd = para_sim_command() + [
                "eval",
                "--checkpoint",
                checkpoint,
                "--episodes",
                str(args.episodes),
                "--seed",
                str(args.seed),
                "--no-videos",
                "--out",
                str(run_dir),
                *error_args,
                *args.eval_arg,
            ]
            print(f"[{i + 1}/{len(points)}] {name} {label}: {' '.join(cmd)}", flush=True)
            summary = run_point(cmd, run_dir, args.episodes, args.dry_run)
            if summary is None:
                continue
            k, n, (lo, hi) = summary["successes"], summary["episodes"], summary["wilson95"]
            counts = {what: c for what, c in summary["outcomes"].items() if c}
            row["checkpoints"][name] = {
                "successes": k,
                "episodes": n,
                "rate": k / n if n else 0.0,
                "wilson_lo": lo,
                "wilson_hi": hi,
                "outcomes": counts,
            }
            print(f"  {name} {label}: {k}/{n} ({100 * k / max(n, 1):.1f} %, {100 * lo:.1f}-{100 * hi:.1f} %) {counts}")
        if row["checkpoints"]:
            rows.append(row)
    if args.dry_run or not rows:
        return 0
    names = [name for name, _ in checkpoints]
    settings = {
        "checkpoints": dict(checkpoints),
        "told": args.calibration or "the simulator's nominal pose (camera rendered off it)",
        "seed": args.seed,
        "eval_args": args.eval_arg,
    }
    (out / "sensitivity.json").write_text(json.dumps({"settings": settings, "rows": rows}, indent=1))
    table = write_table(out, rows, names)
    print(table)
    plot(out, rows, names)
    print(f"wrote {out / 'sensitivity.md'} and {out / 'sensitivity.png'}")
    return 0


def write_table(out: Path, rows: list[dict], names: list[str]) -> str:
    """``sensitivity.md``: a row per error, a column per checkpoint (successes, rate, Wilson interval, outcomes)."""
    lines = ["| scene camera error | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for r in rows:
        cells = []
        for name in names:
            c = r["checkpoints"].get(name)
            if c is None:
                cells.append("not run")
                continue
            outcomes = ", ".join(f"{v} {k}" for k, v in sorted(c["outcomes"].items()) if k != "success")
            cells.append(
                f"{c['successes']}/{c['episodes']} ({100 * c['wilson_lo']:.0f}-{100 * c['wilson_hi']:.0f} %)"
                + (f"; {outcomes}" if outcomes else "")
            )
        lines.append(f"| {point_text(r)} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    (out / "sensitivity.md").write_text(text)
    return text


def plot(out: Path, rows: list[dict], names: list[str]) -> None:
    """``sensitivity.png``: success against the translation and the rotation error, a line per checkpoint."""
    import matplotlib  # matplotlib: only for the plot at the end

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharey=True)
    for ax, key, unit, sel in (
        (axes[0], "translation_mm", "mm", lambda r: r["rotation_deg"] == 0),
        (axes[1], "rotation_deg", "deg", lambda r: r["translation_mm"] == 0),
    ):
        for name in names:
            pts = sorted((r for r in rows if sel(r) and name in r["checkpoints"]), key=lambda r: r[key])
            cs = [r["checkpoints"][name] for r in pts]
            x = [r[key] for r in pts]
            y = [100 * c["rate"] for c in cs]
            err = [[100 * (c["rate"] - c["wilson_lo"]) for c in cs], [100 * (c["wilson_hi"] - c["rate"]) for c in cs]]
            ax.errorbar(x, y, yerr=err, marker="o", capsize=4, label=name)
        ax.set_xlabel(f"scene camera extrinsic error ({unit})")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("closed-loop success (%)")
    axes[0].set_ylim(0, 105)
    axes[1].legend()
    fig.suptitle("success against the scene camera's calibration error (95 % Wilson intervals)")
    fig.tight_layout()
    fig.savefig(out / "sensitivity.png", dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
