"""How good a calibration PARA needs: closed-loop success against the error of the scene camera's extrinsics.

The simulator renders the scene camera at its true pose and the graph is told a pose that is wrong by a known amount
(a calibration file with the error added, ``sim_node`` ``scene_cam_tf:=calibration``), so the policy's voxel grid
and its projections are off exactly as they would be with an imperfect calibration. For each error the script runs
``para-sim eval`` on the same held-out seeds and writes a table (``sensitivity.md`` / ``.json``) and a plot
(``sensitivity.png``) of the success rate with its 95 % Wilson interval.

The errors are applied in the camera's own optical frame: a translation along its x axis (the image's horizontal
direction, the direction that moves projections most) and a rotation about its x axis (a tilt, which moves the
ray's footprint on the table along the line of sight). Both are stated in the output.

Usage::

    python bench/calibration_sensitivity.py --calibration calibration.yaml --out runs/sensitivity \\
        --translation-mm 0,5,10,20 --rotation-deg 1,2,5 --episodes 30 [--eval-arg=--lockstep ...]
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
        required=True,
        help="calibration.yaml whose scene_cam is the pose to perturb "
        "(for the simulator: a solved file of the simulator's nominal camera)",
    )
    p.add_argument("--out", required=True, help="output directory (one eval per point, the table and the plot)")
    p.add_argument("--checkpoint", default="checkpoints/pick_place")
    p.add_argument("--translation-mm", default="0,5,10,20", help="translation errors along the camera's x axis (mm)")
    p.add_argument("--rotation-deg", default="1,2,5", help="rotation errors about the camera's x axis (deg)")
    p.add_argument("--episodes", type=int, default=30)
    p.add_argument("--seed", type=int, default=100000)
    p.add_argument("--eval-arg", action="append", default=[], help="extra argument for para-sim eval (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="write the calibration files, print the commands, run none")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = load_calibration(args.calibration)
    points = [(float(t) / 1000.0, 0.0) for t in args.translation_mm.split(",") if t.strip()]
    points += [(0.0, float(r)) for r in args.rotation_deg.split(",") if r.strip()]
    rows = []
    for i, (t_m, r_deg) in enumerate(points):
        label = f"t{t_m * 1000:g}mm_r{r_deg:g}deg"
        cal_path = out / f"calibration_{label}.yaml"
        save_calibration(perturbed_scene_camera(base, t_m, r_deg), cal_path, force=True)
        run_dir = out / label
        cmd = (
            para_sim_command()
            + [
                "eval",
                "--checkpoint",
                args.checkpoint,
                "--episodes",
                str(args.episodes),
                "--seed",
                str(args.seed),
                "--no-videos",
                "--out",
                str(run_dir),
                "--node-param",
                "sim_node:scene_cam_tf:=calibration",
                "--node-param",
                "sim_node:wrist_cam_tf:=truth",
                "--node-param",
                f"sim_node:calibration_file:={cal_path.resolve()}",
            ]
            + list(args.eval_arg)
        )
        print(f"[{i + 1}/{len(points)}] {label}: {' '.join(cmd)}", flush=True)
        if args.dry_run:
            continue
        if not (run_dir / "report.json").exists() or read_summary(run_dir / "report.json")["episodes"] < args.episodes:
            subprocess.run(cmd, check=False, env=os.environ.copy())
        if not (run_dir / "report.json").exists():
            print(f"  no report for {label}", flush=True)
            continue
        summary = read_summary(run_dir / "report.json")
        k, n, (lo, hi) = summary["successes"], summary["episodes"], summary["wilson95"]
        counts = {name: c for name, c in summary["outcomes"].items() if c}
        rows.append(
            {
                "translation_mm": t_m * 1000,
                "rotation_deg": r_deg,
                "successes": k,
                "episodes": n,
                "rate": k / n if n else 0.0,
                "wilson_lo": lo,
                "wilson_hi": hi,
                "outcomes": counts,
            }
        )
        print(f"  {label}: {k}/{n} ({100 * k / max(n, 1):.1f} %, {100 * lo:.1f}-{100 * hi:.1f} %) {counts}", flush=True)
    if args.dry_run or not rows:
        return 0
    (out / "sensitivity.json").write_text(json.dumps(rows, indent=1))
    lines = ["| scene camera error | episodes | successes | rate (95 % Wilson) | outcomes |", "|---|---|---|---|---|"]
    for r in rows:
        what = f"{r['translation_mm']:g} mm along x" if r["rotation_deg"] == 0 else f"{r['rotation_deg']:g} deg about x"
        outcomes = ", ".join(f"{v} {k}" for k, v in sorted(r["outcomes"].items()))
        lines.append(
            f"| {what} | {r['episodes']} | {r['successes']} | {100 * r['rate']:.1f} % "
            f"({100 * r['wilson_lo']:.1f}-{100 * r['wilson_hi']:.1f} %) | {outcomes} |"
        )
    (out / "sensitivity.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    import matplotlib  # matplotlib: only for the plot at the end

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharey=True)
    for ax, key, unit, sel in (
        (axes[0], "translation_mm", "mm", lambda r: r["rotation_deg"] == 0),
        (axes[1], "rotation_deg", "deg", lambda r: r["translation_mm"] == 0),
    ):
        pts = sorted((r for r in rows if sel(r)), key=lambda r: r[key])
        x = [r[key] for r in pts]
        y = [100 * r["rate"] for r in pts]
        err = [[100 * (r["rate"] - r["wilson_lo"]) for r in pts], [100 * (r["wilson_hi"] - r["rate"]) for r in pts]]
        ax.errorbar(x, y, yerr=err, marker="o", capsize=4)
        ax.set_xlabel(f"scene camera extrinsic error ({unit})")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("closed-loop success (%)")
    axes[0].set_ylim(0, 105)
    fig.suptitle(f"{args.checkpoint}: success vs calibration error ({rows[0]['episodes']} episodes a point)")
    fig.tight_layout()
    fig.savefig(out / "sensitivity.png", dpi=120)
    print(f"wrote {out / 'sensitivity.md'} and {out / 'sensitivity.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
