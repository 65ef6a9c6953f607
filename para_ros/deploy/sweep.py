"""``para-sim sweep``: the closed-loop evaluation (``para-sim eval``) of one or more checkpoints over a grid of scene
camera moves, as a table of success rates with 95 % Wilson intervals and a plot (the viewpoint test of the PARA v4
design: pixel-aligned actions should follow the camera).

Points: by default one axis at a time around the nominal camera (the nominal point once, then each non-zero orbit,
each non-zero height change, each other field of view; ``--grid product`` runs every combination). A move is a
:class:`para_ros.sim.camera_sampler.CameraMove`; it reaches the simulator as ``--camera-shift`` / ``--camera-rotate``
(the exact pose) and, for another field of view, ``sim_node:scene_cam_fovy_deg``. Every point is checked before
anything runs: one whose camera does not see the whole workspace is refused with its visible fraction, and so is a
checkpoint the simulator cannot drive.

Output folder::

    OUT/<checkpoint label>/<point label>/   para-sim eval's report (report.json, report.md, outcomes.png, logs/)
    OUT/sweep.json, OUT/sweep.md, OUT/sweep.png

A point whose ``report.json`` already holds the requested episodes (uninterrupted, no lockstep fault) is not run
again; any other point report is continued (``para-sim eval --continue``: its episodes are kept, only the missing
layouts run). So an interrupted sweep continues where it stopped, and a sweep run again with more ``--episodes`` runs
only the new ones.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import numpy as np

from para_ros.paths import shipped_node_params
from para_ros.sim.camera_sampler import CameraMove, NominalCamera, camera_pose, visible_fraction
from para_ros.sim.layout_region import add_region_argument
from para_ros.sim.lockstep import add_lockstep_argument

AXES = ("orbit", "height", "fovy")


@dataclass(frozen=True)
class SweepPoint:
    """One camera of the sweep: the axis it varies (``nominal`` for the unmoved camera, ``grid`` for a combination),
    the move, a folder-safe label."""

    axis: str
    move: CameraMove
    label: str

    def value(self, nominal: NominalCamera) -> float:
        """The point's coordinate on its axis (degrees, metres or degrees of field of view)."""
        if self.axis == "orbit":
            return self.move.orbit_deg
        if self.axis == "height":
            return self.move.height_m
        if self.axis == "fovy":
            return self.move.fovy_deg if self.move.fovy_deg is not None else nominal.fovy_deg
        return 0.0


def _label(orbit: float, height: float, fovy: float | None) -> str:
    text = f"orbit{orbit:+g}_height{100 * height:+g}cm"
    return text + (f"_fovy{fovy:g}" if fovy is not None else "")


def sweep_points(orbits_deg, heights_m, fovys_deg, nominal: NominalCamera, product: bool = False) -> list[SweepPoint]:
    """The points of a sweep (see the module docstring); a field of view equal to the nominal one counts as none."""
    fovys = [None if abs(f - nominal.fovy_deg) < 1e-9 else float(f) for f in fovys_deg] or [None]
    if product:
        out = []
        for o in orbits_deg or [0.0]:
            for h in heights_m or [0.0]:
                for f in fovys:
                    axis = "nominal" if (o == 0 and h == 0 and f is None) else "grid"
                    out.append(SweepPoint(axis, CameraMove(orbit_deg=o, height_m=h, fovy_deg=f), _label(o, h, f)))
        return out
    out = [SweepPoint("nominal", CameraMove(), _label(0.0, 0.0, None))]
    out += [SweepPoint("orbit", CameraMove(orbit_deg=o), _label(o, 0.0, None)) for o in orbits_deg if o != 0]
    out += [SweepPoint("height", CameraMove(height_m=h), _label(0.0, h, None)) for h in heights_m if h != 0]
    out += [SweepPoint("fovy", CameraMove(fovy_deg=f), _label(0.0, 0.0, f)) for f in fovys if f is not None]
    return out


def shift_and_rotation(T_from: np.ndarray, T_to: np.ndarray) -> tuple[tuple, tuple]:
    """``para-sim eval``'s ``--camera-shift`` (metres, world) and ``--camera-rotate`` (rotation vector, degrees, world
    axes about the camera centre) that move camera pose ``T_from`` (4, 4) to ``T_to`` (4, 4) exactly (see
    ``para_ros.deploy.closed_loop.moved_camera_pose``)."""
    from scipy.spatial.transform import Rotation  # scipy: loaded on first use, not on import

    R_delta = T_to[:3, :3] @ T_from[:3, :3].T  # (3, 3) world-frame turn
    rotvec_deg = np.degrees(Rotation.from_matrix(R_delta).as_rotvec())  # (3,)
    shift = T_to[:3, 3] - T_from[:3, 3]  # (3,)
    return tuple(float(v) for v in shift), tuple(float(v) for v in rotvec_deg)


def parse_checkpoints(text: str) -> list[tuple[str, str]]:
    """``LABEL=DIR,DIR2,...`` -> [(label, dir)] (a label defaults to the folder name; labels must differ)."""
    out = []
    for item in [t for t in text.split(",") if t.strip()]:
        label, _, path = item.partition("=") if "=" in item else (Path(item.rstrip("/")).name, "", item)
        label, path = label.strip(), path.strip()
        if not label or not path:
            raise ValueError(f"--checkpoint {text!r}: {item!r} is not DIR or LABEL=DIR")
        out.append((label, path))
    labels = [label for label, _ in out]
    if not out or len(set(labels)) != len(labels):
        raise ValueError(f"--checkpoint {text!r}: give one or more checkpoints with distinct labels (LABEL=DIR)")
    return out


def _numbers(text: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give numbers separated by commas, e.g. -40,-25,0,25,40") from None


def add_sweep_arguments(p) -> None:
    p.add_argument(
        "--checkpoint",
        required=True,
        metavar="[LABEL=]DIR[,...]",
        help="checkpoint directories, comma-separated, each optionally labelled, e.g. "
        "fixed=checkpoints/pick_place,regression=checkpoints/pick_place_regression",
    )
    p.add_argument(
        "--orbit-deg",
        type=_numbers,
        default=[-40.0, -25.0, 0.0, 25.0, 40.0],
        metavar="LIST",
        help="orbits about the workspace's vertical axis, degrees (default -40,-25,0,25,40)",
    )
    p.add_argument(
        "--height-m",
        type=_numbers,
        default=[-0.15, 0.0, 0.15],
        metavar="LIST",
        help="camera height changes, metres, still aimed at the workspace (default -0.15,0,0.15)",
    )
    p.add_argument(
        "--fovy-deg",
        type=_numbers,
        default=[30.0, 46.0],
        metavar="LIST",
        help="vertical fields of view, degrees (default 30,46; the nominal one is 38)",
    )
    p.add_argument(
        "--grid",
        choices=("axes", "product"),
        default="axes",
        help="'axes': one axis at a time around the nominal camera (default); 'product': every combination",
    )
    p.add_argument("--episodes", type=int, default=30, help="episodes per point and checkpoint (default 30)")
    p.add_argument("--seed", type=int, default=100000, help="layout seed of the first episode (default 100000)")
    p.add_argument("--out", default="", help="sweep folder (default runs/sweep-<time>)")
    p.add_argument("--time-limit", type=float, default=30.0, dest="time_limit_s", help="seconds per episode")
    p.add_argument("--settle", type=float, default=1.5, dest="settle_s", help="seconds between reset and policy")
    p.add_argument("--device", default="", help="inference device (default: config/inference.yaml's)")
    p.add_argument("--fast-path", action="store_true", help="the inference node's fast path")
    p.add_argument(
        "--node-param",
        action="append",
        default=[],
        metavar="NODE:NAME:=VALUE",
        help="a parameter for one node of the graph at every point (repeatable)",
    )
    add_lockstep_argument(p)
    p.add_argument("--videos", action="store_true", help="write para-sim eval's videos at every point (default off)")
    p.add_argument("--dry-run", action="store_true", help="check and list the points, run nothing")
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="run N cells (checkpoint x point) side by side, each a para-sim eval in its own ROS domain (1..the "
        "machine's cores, with --lockstep: the same results as one after another)",
    )
    p.add_argument(
        "--print-commands",
        action="store_true",
        help="print the para-sim eval command of every cell not done yet (for a cluster's job scheduler) and run "
        "nothing; --report-only then joins their reports",
    )
    p.add_argument(
        "--report-only",
        action="store_true",
        help="run nothing: rebuild sweep.md / sweep.json / sweep.png from the point reports already under --out "
        "(OUT/<label>/<point>/report.json, whatever their episode counts; a missing point is '-'), e.g. to put "
        "sweeps of different checkpoints into one table",
    )
    add_region_argument(p)


def _cell(summary: dict | None) -> str:
    if not summary:
        return "-"
    lo, hi = summary["wilson95"]
    return (
        f"{summary['successes']}/{summary['episodes']} = {100 * summary['success_rate']:.0f} % "
        f"({100 * lo:.0f}-{100 * hi:.0f} %)"
    )


def write_table(
    out: Path, points: list[SweepPoint], labels: list[str], results: dict, nominal: NominalCamera, settings: dict
) -> dict:
    """``sweep.json`` and ``sweep.md``: one row per point, one column per checkpoint (successes, rate, interval)."""
    rows = []
    for pt in points:
        row = {
            "point": pt.label,
            "axis": pt.axis,
            "value": pt.value(nominal),
            "move": pt.move.to_dict(),
            "visible_fraction": results.get(("visible", pt.label)),
            "results": {},
        }
        for label in labels:
            row["results"][label] = results.get((label, pt.label))
        rows.append(row)
    data = {
        "settings": settings,
        "checkpoints": labels,
        "nominal_camera": {
            "position_m": list(nominal.position_m),
            "look_at_m": list(nominal.look_at_m),
            "fovy_deg": nominal.fovy_deg,
        },
        "points": rows,
    }
    (out / "sweep.json").write_text(json.dumps(data, indent=2))
    lines = [
        "# para-sim sweep",
        "",
        f"- episodes per point: {settings['episodes']} (layout seeds from {settings['seed']}"
        + (f", cube in {settings['cube_region']}" if settings.get("cube_region") else "")
        + ")",
        "- success rate with its 95 % Wilson interval; moves relative to the nominal scene camera "
        f"(fovy {nominal.fovy_deg:g} deg)",
        "",
        "| camera move | " + " | ".join(labels) + " |",
        "|---|" + "---|" * len(labels),
    ]
    for pt, row in zip(points, rows):
        lines.append(f"| {pt.move.describe()} | " + " | ".join(_cell(row["results"][lb]) for lb in labels) + " |")
    (out / "sweep.md").write_text("\n".join(lines) + "\n")
    return data


def plot_sweep(data: dict, path: Path) -> Path | None:
    """Success rate (with Wilson interval bars) against the move, one panel per axis, one line per checkpoint."""
    import matplotlib  # matplotlib: loaded on first use, not on import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after matplotlib.use

    nominal = next((p for p in data["points"] if p["axis"] == "nominal"), None)
    axes = [a for a in AXES if any(p["axis"] == a for p in data["points"])]
    if not axes:
        return None
    units = {
        "orbit": ("orbit about the workspace, deg", 1.0, 0.0),
        "height": ("camera height change, cm", 100.0, 0.0),
        "fovy": ("vertical field of view, deg", 1.0, data["nominal_camera"]["fovy_deg"]),
    }
    fig, panels = plt.subplots(1, len(axes), figsize=(4.6 * len(axes), 3.8), squeeze=False)
    for ax, axis in zip(panels[0], axes):
        title, scale, nominal_x = units[axis]
        pts = [p for p in data["points"] if p["axis"] == axis] + ([nominal] if nominal else [])
        for label in data["checkpoints"]:
            xy = []
            for p in pts:
                r = p["results"].get(label)
                if r and r["episodes"]:
                    x = nominal_x if p["axis"] == "nominal" else p["value"]
                    xy.append((x * scale, r["success_rate"], r["wilson95"]))
            if not xy:
                continue
            xy.sort(key=lambda t: t[0])
            x = np.array([t[0] for t in xy])
            y = np.array([t[1] for t in xy])
            # (2, n); clipped: at 0 or n successes the rate and its interval's end differ by rounding only
            err = np.clip(np.array([[t[1] - t[2][0] for t in xy], [t[2][1] - t[1] for t in xy]]), 0.0, None)
            ax.errorbar(x, 100 * y, yerr=100 * err, marker="o", capsize=3, label=label)
        ax.set_xlabel(title)
        ax.set_ylabel("success rate, % (95 % Wilson interval)")
        ax.set_ylim(-3, 103)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    episodes = data["settings"]["episodes"]
    fig.suptitle(
        f"para-sim sweep: {episodes} episodes per point"
        if isinstance(episodes, int)
        else "para-sim sweep (episodes per point: see the table)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _finished_summary(report_path: Path, episodes: int | None) -> dict | None:
    """The summary of a finished point report of at least ``episodes`` episodes (None: of any number), else None:
    a point run with more episodes before counts as done; one with a lockstep fault does not (it is continued, which
    runs the faulted layouts again)."""
    if not report_path.is_file():
        return None
    report = json.loads(report_path.read_text())
    s = report.get("summary") or {}
    if episodes is not None and (s.get("episodes", 0) < episodes or (s.get("outcomes") or {}).get("fault", 0)):
        return None
    if not report.get("interrupted") and "error" not in report and s.get("episodes"):
        return s
    return None


def cmd_sweep(args) -> int:
    # rclpy, OpenCV: the evaluation is loaded for the sweep only (importing this module stays ROS-free)
    from para_ros.deploy import graph
    from para_ros.deploy.closed_loop import EvalSettings, check_checkpoint_matches_sim, run_eval
    from para_ros.deploy.graph_run import INTERRUPTED_RC

    def refuse(msg: str) -> int:
        print(f"para-sim sweep: {msg}", file=sys.stderr)
        return 2

    nominal = NominalCamera.from_sim_config()
    try:
        checkpoints = parse_checkpoints(args.checkpoint)
        for _, path in checkpoints:
            check_checkpoint_matches_sim(path)
        points = sweep_points(args.orbit_deg, args.height_m, args.fovy_deg, nominal, args.grid == "product")
        node_params = graph.parse_node_params(args.node_param)
        base = EvalSettings(
            checkpoint=checkpoints[0][1],
            episodes=args.episodes,
            seed=args.seed,
            time_limit_s=args.time_limit_s,
            settle_s=args.settle_s,
            device=args.device,
            fast_path=args.fast_path,
            videos=args.videos,
            node_params=node_params,
            cube_region=args.cube_region.text if args.cube_region else "",
            lockstep=args.lockstep,
        )
    except ValueError as exc:
        return refuse(str(exc))
    sim = {**shipped_node_params("config/sim.yaml", "sim_node"), **node_params.get("sim_node", {})}
    T_nominal = camera_pose(CameraMove(), nominal)[0]
    results: dict = {}
    plans = []
    for pt in points:
        T, fovy = camera_pose(pt.move, nominal)
        frac = visible_fraction(T, fovy, int(sim["image_width"]), int(sim["image_height"]))
        results[("visible", pt.label)] = frac
        if frac < 1.0:
            return refuse(
                f"camera move {pt.move.describe()} sees {100 * frac:.0f} % of the workspace (needs "
                "100 %): drop it from the sweep or choose a smaller move"
            )
        shift, rot = shift_and_rotation(T_nominal, T)
        sim_params = dict(node_params.get("sim_node", {}))
        if pt.move.fovy_deg is not None:
            sim_params["scene_cam_fovy_deg"] = float(pt.move.fovy_deg)
        plans.append((pt, shift, rot, {**node_params, "sim_node": sim_params} if sim_params else node_params))
    n_runs = len(points) * len(checkpoints)
    print(
        f"para-sim sweep: {len(points)} camera point(s) x {len(checkpoints)} checkpoint(s) x {args.episodes} "
        f"episodes = {n_runs * args.episodes} episodes"
    )
    for pt in points:
        print(
            f"  {pt.label:32s} {pt.move.describe()}  (workspace {100 * results[('visible', pt.label)]:.0f} % in view)"
        )
    if args.dry_run:
        return 0
    if args.report_only and not args.out:
        return refuse("--report-only needs --out, the sweep folder that holds the reports")
    out = Path(args.out or Path("runs") / datetime.now().strftime("sweep-%Y%m%d-%H%M%S"))
    out.mkdir(parents=True, exist_ok=True)
    labels = [label for label, _ in checkpoints]
    settings_record = {
        "episodes": args.episodes,
        "seed": args.seed,
        "grid": args.grid,
        "cube_region": base.cube_region,
        "checkpoints": dict(checkpoints),
        "time_limit_s": args.time_limit_s,
        "settle_s": args.settle_s,
        "fast_path": args.fast_path,
        "lockstep": args.lockstep,
        "node_params": node_params,
    }

    def write_outputs() -> None:  # sweep.json, sweep.md and sweep.png from the results so far
        data = write_table(out, points, labels, results, nominal, settings_record)
        plot_sweep(data, out / "sweep.png")

    if args.report_only:
        settings_record["episodes"] = "as in each cell"
        for label, _path in checkpoints:
            for pt, *_ in plans:
                results[(label, pt.label)] = _finished_summary(out / label / pt.label / "report.json", None)
        write_outputs()
        print((out / "sweep.md").read_text())
        return 0
    if args.jobs > 1 or args.print_commands:
        return _sweep_in_parallel(args, out, checkpoints, plans, base, results, write_outputs)
    rc = 0
    done = 0
    for label, path in checkpoints:
        for pt, shift, rot, params in plans:
            done += 1
            point_dir = out / label / pt.label
            summary = _finished_summary(point_dir / "report.json", args.episodes)
            if summary is None:
                print(f"[{done}/{n_runs}] {label} at {pt.move.describe()}", flush=True)
                code = run_eval(_cell_settings(base, path, point_dir, shift, rot, params))
                if code == INTERRUPTED_RC:  # Ctrl-C / SIGTERM stops the sweep, not just this point
                    write_outputs()
                    print(
                        f"para-sim sweep: interrupted at {label} {pt.move.describe()}; the same command continues "
                        "from this point (finished points are kept)",
                        file=sys.stderr,
                    )
                    return INTERRUPTED_RC
                rc = rc or code
                report = point_dir / "report.json"
                summary = json.loads(report.read_text())["summary"] if report.is_file() else None
            else:
                print(
                    f"[{done}/{n_runs}] {label} at {pt.move.describe()}: done before, "
                    f"{summary['successes']}/{summary['episodes']}",
                    flush=True,
                )
            results[(label, pt.label)] = summary
            write_outputs()
    print((out / "sweep.md").read_text())
    print(f"para-sim sweep: table {out / 'sweep.md'} (and sweep.json), plot {out / 'sweep.png'}")
    return rc


def _cell_settings(base, path: str, point_dir: Path, shift, rot, params):
    """The evaluation of one cell (checkpoint x point), continuing what its folder holds."""
    return replace(
        base, checkpoint=path, out=str(point_dir), camera_shift_m=shift, camera_rotate_deg=rot, node_params=params,
        resume=True,
    )  # fmt: skip


def _sweep_in_parallel(args, out: Path, checkpoints, plans, base, results, write_outputs) -> int:
    """``--jobs N`` / ``--print-commands``: every cell not done yet as its own ``para-sim eval`` command, printed or
    run N at a time (para_ros.deploy.parallel_eval), then the table from their reports."""
    import shlex

    from para_ros.deploy import parallel_eval as par

    try:
        par.check_jobs(args.jobs, base.lockstep, here=not args.print_commands)
        commands = [
            par.eval_command(_cell_settings(base, path, out / label / pt.label, shift, rot, params))
            for label, path in checkpoints
            for pt, shift, rot, params in plans
            if _finished_summary(out / label / pt.label / "report.json", args.episodes) is None
        ]
    except ValueError as exc:
        print(f"para-sim sweep: {exc}", file=sys.stderr)
        return 2
    if args.print_commands:
        for cmd in commands:
            print(shlex.join(cmd))
        print(f"# then: para-sim sweep ... --out {out} --report-only  (the same options)")
        return 0
    print(f"para-sim sweep: {len(commands)} cell(s) to run, {args.jobs} at a time", flush=True)
    statuses = par.run_commands(commands, args.jobs)
    for label, _path in checkpoints:
        for pt, *_ in plans:
            results[(label, pt.label)] = _finished_summary(out / label / pt.label / "report.json", None)
    write_outputs()
    print((out / "sweep.md").read_text())
    failed = [str(Path(c[c.index("--out") + 1])) for c, rc in zip(commands, statuses) if rc != 0]
    if failed:
        print(f"para-sim sweep: these cells did not finish (see OUT.log beside each): {failed}", file=sys.stderr)
        return 1
    return 0
