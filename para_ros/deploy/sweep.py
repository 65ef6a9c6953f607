"""The sweep behind ``para-sim sweep``: the closed-loop evaluation (``para-sim eval``) of one or more checkpoints over
a grid of scene camera moves, as a table of success rates with 95 % Wilson intervals and a plot (the viewpoint test of
the PARA v4 design: pixel-aligned actions should follow the camera). :func:`run_sweep` takes a
:class:`SweepSettings`; the command's options and their translation live in ``para_ros.commands.sim_sweep``.

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

import json
import sys
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

import numpy as np

from para_ros.paths import effective_params
from para_ros.sim.camera_sampler import CameraMove, NominalCamera, camera_pose, visible_fraction

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


def point_label(orbit: float, height: float, fovy: float | None = None) -> str:
    """A sweep point's folder name, e.g. ``orbit+25_height+0cm`` (``_fovy30`` added for another field of view)."""
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
                    out.append(SweepPoint(axis, CameraMove(orbit_deg=o, height_m=h, fovy_deg=f), point_label(o, h, f)))
        return out
    out = [SweepPoint("nominal", CameraMove(), point_label(0.0, 0.0, None))]
    out += [SweepPoint("orbit", CameraMove(orbit_deg=o), point_label(o, 0.0, None)) for o in orbits_deg if o != 0]
    out += [SweepPoint("height", CameraMove(height_m=h), point_label(0.0, h, None)) for h in heights_m if h != 0]
    out += [SweepPoint("fovy", CameraMove(fovy_deg=f), point_label(0.0, 0.0, f)) for f in fovys if f is not None]
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


@dataclass(frozen=True)
class SweepSettings:
    """One sweep: the checkpoints as (label, directory) pairs with distinct labels, the camera grid (``grid``:
    ``axes``, one axis at a time around the nominal camera, or ``product``, every combination), the evaluation of
    every cell (as ``para-sim eval``'s: episodes, seeds, limits, node parameters ``{node: {name: value}}``, the cube
    region's text, "" for none) and what to do: run the cells (``jobs`` at a time), only check and list the points
    (``dry_run``), print each cell's ``para-sim eval`` command (``print_commands``) or only rebuild the table from the
    reports under ``out`` (``report_only``). ``out`` "" is ``runs/sweep-<time>``."""

    checkpoints: tuple[tuple[str, str], ...]
    orbits_deg: tuple[float, ...] = (-40.0, -25.0, 0.0, 25.0, 40.0)
    heights_m: tuple[float, ...] = (-0.15, 0.0, 0.15)
    fovys_deg: tuple[float, ...] = (30.0, 46.0)
    grid: str = "axes"
    episodes: int = 30
    seed: int = 100000
    out: str = ""
    time_limit_s: float = 30.0
    settle_s: float = 1.5
    device: str = ""
    fast_path: bool = False
    node_params: dict = field(default_factory=dict)
    lockstep: bool = False
    videos: bool = False
    cube_region: str = ""
    dry_run: bool = False
    jobs: int = 1
    print_commands: bool = False
    report_only: bool = False


def run_sweep(settings: SweepSettings) -> int:
    """Check every point and checkpoint before anything runs (2, said on stderr, for one refused), then run, list,
    print or join the cells as ``settings`` asks and write ``sweep.json``, ``sweep.md`` and ``sweep.png``. The exit
    status: 0, the first failing cell's, ``INTERRUPTED_RC`` when stopped by a signal (finished cells are kept)."""
    # rclpy, OpenCV: the evaluation is loaded for the sweep only (importing this module stays ROS-free)
    from para_ros.deploy.closed_loop import EvalSettings, check_checkpoint_matches_sim, finished_summary, run_eval
    from para_ros.deploy.graph_run import INTERRUPTED_RC

    def refuse(msg: str) -> int:
        print(f"para-sim sweep: {msg}", file=sys.stderr)
        return 2

    nominal = NominalCamera.from_sim_config()
    checkpoints = list(settings.checkpoints)
    node_params = settings.node_params
    try:
        if not checkpoints:
            raise ValueError("no checkpoint to sweep")
        for _, path in checkpoints:
            check_checkpoint_matches_sim(path)
        points = sweep_points(
            settings.orbits_deg, settings.heights_m, settings.fovys_deg, nominal, settings.grid == "product"
        )
        base = EvalSettings(
            checkpoint=checkpoints[0][1],
            episodes=settings.episodes,
            seed=settings.seed,
            time_limit_s=settings.time_limit_s,
            settle_s=settings.settle_s,
            device=settings.device,
            fast_path=settings.fast_path,
            videos=settings.videos,
            node_params=node_params,
            cube_region=settings.cube_region,
            lockstep=settings.lockstep,
        )
    except ValueError as exc:
        return refuse(str(exc))
    sim = effective_params("config/sim.yaml", "sim_node", node_params.get("sim_node", {}))
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
        f"para-sim sweep: {len(points)} camera point(s) x {len(checkpoints)} checkpoint(s) x {settings.episodes} "
        f"episodes = {n_runs * settings.episodes} episodes"
    )
    for pt in points:
        print(
            f"  {pt.label:32s} {pt.move.describe()}  (workspace {100 * results[('visible', pt.label)]:.0f} % in view)"
        )
    if settings.dry_run:
        return 0
    if settings.report_only and not settings.out:
        return refuse("--report-only needs --out, the sweep folder that holds the reports")
    out = Path(settings.out or Path("runs") / datetime.now().strftime("sweep-%Y%m%d-%H%M%S"))
    out.mkdir(parents=True, exist_ok=True)
    labels = [label for label, _ in checkpoints]
    settings_record = {
        "episodes": settings.episodes,
        "seed": settings.seed,
        "grid": settings.grid,
        "cube_region": base.cube_region,
        "checkpoints": dict(checkpoints),
        "time_limit_s": settings.time_limit_s,
        "settle_s": settings.settle_s,
        "fast_path": settings.fast_path,
        "lockstep": settings.lockstep,
        "node_params": node_params,
    }

    def write_outputs() -> None:  # sweep.json, sweep.md and sweep.png from the results so far
        data = write_table(out, points, labels, results, nominal, settings_record)
        plot_sweep(data, out / "sweep.png")

    if settings.report_only:
        settings_record["episodes"] = "as in each cell"
        for label, _path in checkpoints:
            for pt, *_ in plans:
                results[(label, pt.label)] = finished_summary(out / label / pt.label / "report.json", None)
        write_outputs()
        print((out / "sweep.md").read_text())
        return 0
    if settings.jobs > 1 or settings.print_commands:
        return _sweep_in_parallel(settings, out, checkpoints, plans, base, results, write_outputs)
    rc = 0
    done = 0
    for label, path in checkpoints:
        for pt, shift, rot, params in plans:
            done += 1
            point_dir = out / label / pt.label
            summary = finished_summary(point_dir / "report.json", settings.episodes)
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


def _sweep_in_parallel(settings: SweepSettings, out: Path, checkpoints, plans, base, results, write_outputs) -> int:
    """``--jobs N`` / ``--print-commands``: every cell not done yet as its own ``para-sim eval`` command, printed or
    run N at a time (para_ros.deploy.parallel_eval), then the table from their reports."""
    from para_ros.deploy.closed_loop import finished_summary
    from para_ros.deploy.parallel_eval import run_evaluations

    runs = [
        _cell_settings(base, path, out / label / pt.label, shift, rot, params)
        for label, path in checkpoints
        for pt, shift, rot, params in plans
        if finished_summary(out / label / pt.label / "report.json", settings.episodes) is None
    ]
    rc = run_evaluations(runs, settings.jobs, settings.print_commands, base.lockstep, "para-sim sweep", out)
    if rc == 2 or settings.print_commands:
        return rc
    for label, _path in checkpoints:
        for pt, *_ in plans:
            results[(label, pt.label)] = finished_summary(out / label / pt.label / "report.json", None)
    write_outputs()
    print((out / "sweep.md").read_text())
    return rc
