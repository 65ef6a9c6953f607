"""``para-sim sweep``'s options and their translation into a :class:`para_ros.deploy.sweep.SweepSettings` (the sweep
itself, its points, table and plot: ``para_ros.deploy.sweep``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from para_ros.deploy import graph
from para_ros.deploy.sweep import SweepSettings, run_sweep
from para_ros.sim.layout_region import add_region_argument
from para_ros.sim.lockstep import add_lockstep_argument

DEFAULTS = SweepSettings(checkpoints=())


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
        default=list(DEFAULTS.orbits_deg),
        metavar="LIST",
        help="orbits about the workspace's vertical axis, degrees (default -40,-25,0,25,40)",
    )
    p.add_argument(
        "--height-m",
        type=_numbers,
        default=list(DEFAULTS.heights_m),
        metavar="LIST",
        help="camera height changes, metres, still aimed at the workspace (default -0.15,0,0.15)",
    )
    p.add_argument(
        "--fovy-deg",
        type=_numbers,
        default=list(DEFAULTS.fovys_deg),
        metavar="LIST",
        help="vertical fields of view, degrees (default 30,46; the nominal one is 38)",
    )
    p.add_argument(
        "--grid",
        choices=("axes", "product"),
        default=DEFAULTS.grid,
        help="'axes': one axis at a time around the nominal camera (default); 'product': every combination",
    )
    p.add_argument(
        "--episodes", type=int, default=DEFAULTS.episodes, help="episodes per point and checkpoint (default 30)"
    )
    p.add_argument("--seed", type=int, default=DEFAULTS.seed, help="layout seed of the first episode (default 100000)")
    p.add_argument("--out", default="", help="sweep folder (default runs/sweep-<time>)")
    p.add_argument(
        "--time-limit", type=float, default=DEFAULTS.time_limit_s, dest="time_limit_s", help="seconds per episode"
    )
    p.add_argument(
        "--settle", type=float, default=DEFAULTS.settle_s, dest="settle_s", help="seconds between reset and policy"
    )
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


def sweep_settings(args) -> SweepSettings:
    """The ``SweepSettings`` of parsed ``para-sim sweep`` options (ValueError for a bad ``--checkpoint`` or
    ``--node-param``)."""
    return SweepSettings(
        checkpoints=tuple(parse_checkpoints(args.checkpoint)),
        orbits_deg=tuple(args.orbit_deg),
        heights_m=tuple(args.height_m),
        fovys_deg=tuple(args.fovy_deg),
        grid=args.grid,
        episodes=args.episodes,
        seed=args.seed,
        out=args.out,
        time_limit_s=args.time_limit_s,
        settle_s=args.settle_s,
        device=args.device,
        fast_path=args.fast_path,
        node_params=graph.parse_node_params(args.node_param),
        lockstep=args.lockstep,
        videos=args.videos,
        cube_region=args.cube_region.text if args.cube_region else "",
        dry_run=args.dry_run,
        jobs=args.jobs,
        print_commands=args.print_commands,
        report_only=args.report_only,
    )


def cmd_sweep(args) -> int:
    try:
        settings = sweep_settings(args)
    except ValueError as exc:
        print(f"para-sim sweep: {exc}", file=sys.stderr)
        return 2
    return run_sweep(settings)
