"""``para-sim``: the simulated pick-and-place task from the command line.

Subcommands::

    para-sim record --out bags/pick_place --episodes 20 --seed 0      # expert bags through sim_node (rosbag2)
    para-sim demos --out data/pick_place --episodes 300 --seed 0      # expert episodes, ROS-free (fast path)
    para-sim expert --episodes 50 --seed 100000                        # expert success rate, nothing recorded
    para-sim eval --checkpoint checkpoints/pick_place --episodes 50    # closed loop through the real nodes
    para-sim sweep --checkpoint checkpoints/pick_place --episodes 30   # the eval over scene camera moves
    para-sim agreement runs/eval-a runs/eval-b                         # two runs of the same seeds: do they agree?
    para-sim confidence-report runs/eval-a runs/eval-ood --out runs/conf # fit the confidence supervisor's thresholds
    para-sim supervisor-table ood=runs/off ood=runs/on --out runs/table  # the supervisor off vs on, holds in time

Episode ``k`` of a run with ``--seed S`` uses the task layout of seed ``S + k`` (``para_ros.sim.pick_place``), so
two runs with the same seed give the same layouts, and seed ranges that do not overlap give disjoint layouts (the
shipped checkpoint trains on seeds 0.. and is evaluated on seeds from 100000).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")  # before anything imports mujoco: an EGL context, no display needed

from para_ros.commands.sim_agreement import add_agreement_arguments, cmd_agreement  # noqa: E402
from para_ros.commands.sim_confidence import (  # noqa: E402
    add_confidence_report_arguments,
    add_supervisor_table_arguments,
    cmd_confidence_report,
    cmd_supervisor_table,
)
from para_ros.commands.sim_suite import add_suite_arguments, cmd_suite  # noqa: E402
from para_ros.commands.sim_sweep import add_sweep_arguments, cmd_sweep  # noqa: E402
from para_ros.deploy import graph  # noqa: E402
from para_ros.robot.yam_ik import YamKinematics  # noqa: E402
from para_ros.sim.camera_sampler import add_randomisation_arguments, apply_to_sim, randomisation_from_args  # noqa: E402
from para_ros.sim.layout_region import add_region_argument, episode_seeds  # noqa: E402
from para_ros.sim.lockstep import add_lockstep_argument  # noqa: E402
from para_ros.sim.pick_place import MAX_SEED, check_seed, sample_layout, wilson_interval  # noqa: E402
from para_ros.sim.rig_randomisation import add_rig_arguments, apply_rig, rig_from_args  # noqa: E402

MAX_EPISODES = 100_000


def _episodes(value: str) -> int:
    n = int(value)
    if not 1 <= n <= MAX_EPISODES:
        raise argparse.ArgumentTypeError(f"episode count {n} is out of range: use 1..{MAX_EPISODES}")
    return n


def _seed(value: str) -> int:
    try:
        return check_seed(int(value))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="para-sim",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demos", help="record expert episodes as para_core episodes (ROS-free)")
    d.add_argument("--out", required=True, help="folder for episode_XXXXX directories")
    d.add_argument("--episodes", type=_episodes, default=300, help="number of episodes (default 300)")
    d.add_argument("--seed", type=_seed, default=0, help=f"layout seed of the first episode (0..{MAX_SEED})")
    d.add_argument(
        "--image-size", type=int, default=256, help="rendered image side, pixels (default 256, as the sim node)"
    )
    d.add_argument("--fps", type=float, default=10.0, help="camera rate in sim time, Hz (default 10, as the sim node)")
    d.add_argument("--keep-failures", action="store_true", help="also write episodes the expert failed")
    d.add_argument("--no-progress", action="store_true")
    _add_generalisation_arguments(d)
    add_rig_arguments(d)
    d.add_argument(
        "--calibration-marker",
        action="store_true",
        help="render the live calibration monitor's ArUco marker on the gripper (a policy deployed with the monitor "
        "should have seen it: docs/calibration.md)",
    )

    r = sub.add_parser("record", help="record expert episodes through sim_node as rosbag2 bags (the real data path)")
    r.add_argument("--out", required=True, help="folder for episode_XXXXXX bag directories")
    r.add_argument("--episodes", type=_episodes, default=20)
    r.add_argument("--seed", type=_seed, default=0)
    r.add_argument("--keep-failures", action="store_true", help="keep bags of episodes the expert failed")
    r.add_argument("--echo", action="store_true", help="show sim_node's output")
    r.add_argument("--no-progress", action="store_true")
    r.add_argument(
        "--calibration-marker",
        action="store_true",
        help="sim_node renders the live calibration monitor's ArUco marker on the gripper",
    )
    _add_generalisation_arguments(r)

    e = sub.add_parser("expert", help="run the expert on seeded layouts and print its success rate")
    e.add_argument("--episodes", type=_episodes, default=50)
    e.add_argument("--seed", type=_seed, default=100000)
    e.add_argument("--out", default=None, help="optional JSON report path")
    e.add_argument("--no-progress", action="store_true")

    add_eval_arguments(
        sub.add_parser(
            "eval", help="closed-loop evaluation of a checkpoint through sim_node + inference_node + chunk_executor"
        )
    )
    add_sweep_arguments(
        sub.add_parser(
            "sweep",
            help="para-sim eval of checkpoints over a grid of scene camera moves: a table and a plot of success rates",
        )
    )
    add_suite_arguments(
        sub.add_parser(
            "suite",
            help="para-sim eval of checkpoints at the nominal rig and at each way a real rig differs "
            "(cameras, mounts, calibration, colours, light, clutter): one table and one plot",
        )
    )
    add_agreement_arguments(
        sub.add_parser(
            "agreement",
            help="two evaluation reports of the same seeds: per-episode agreement, both rates, the paired test",
        )
    )
    add_confidence_report_arguments(
        sub.add_parser(
            "confidence-report",
            help="evaluation runs' chunk confidence vs outcome: separation plot, rates, the supervisor's thresholds "
            "fitted (docs/confidence.md)",
        )
    )
    add_supervisor_table_arguments(
        sub.add_parser(
            "supervisor-table",
            help="evaluation runs with the confidence supervisor off and on, per condition: outcomes paired, the "
            "failing episodes held within --within s of the condition starting, the successful ones held",
        )
    )
    return p


def _add_generalisation_arguments(p) -> None:
    add_region_argument(p)
    add_randomisation_arguments(p)


def add_eval_arguments(p) -> None:
    p.add_argument(
        "--checkpoint",
        default="",
        help=f"checkpoint directory (model.safetensors + config.json; default the shipped {graph.SIM_CHECKPOINT})",
    )
    p.add_argument("--episodes", type=int, default=50, help="episodes to run (1..10000, default 50)")
    p.add_argument(
        "--seed",
        type=int,
        default=100000,
        help=f"layout seed of the first episode (0..{MAX_SEED}; default 100000, outside the training seeds)",
    )
    p.add_argument("--out", default="", help="report folder (default runs/eval-<time>)")
    p.add_argument(
        "--time-limit",
        type=float,
        default=30.0,
        dest="time_limit_s",
        help="seconds per episode before it counts as a timeout (default 30)",
    )
    p.add_argument(
        "--settle",
        type=float,
        default=1.5,
        dest="settle_s",
        help="seconds between the scene reset and handing the arm to the policy (default 1.5)",
    )
    p.add_argument(
        "--camera-shift",
        type=float,
        nargs=3,
        default=(0.0, 0.0, 0.0),
        metavar=("DX", "DY", "DZ"),
        dest="camera_shift_m",
        help="move the scene camera by this world translation, metres (the "
        "viewpoint test: the policy gets the new pose through TF, nothing is retrained)",
    )
    p.add_argument(
        "--camera-rotate",
        type=float,
        nargs=3,
        default=(0.0, 0.0, 0.0),
        metavar=("RX", "RY", "RZ"),
        dest="camera_rotate_deg",
        help="turn the scene camera about its centre by this rotation vector (world axes), degrees",
    )
    p.add_argument(
        "--cube-rgba",
        type=float,
        nargs=4,
        default=(),
        metavar=("R", "G", "B", "A"),
        help="another cube colour (0..1 each)",
    )
    p.add_argument("--light-scale", type=float, default=1.0, help="scale of the lamps' light (default 1)")
    p.add_argument("--device", default="", help="inference device (default: config/inference.yaml's)")
    p.add_argument(
        "--fast-path",
        action="store_true",
        help="the inference node's fast path (para_core.model.v4_fast; default: the reference path)",
    )
    p.add_argument(
        "--node-param",
        action="append",
        default=[],
        metavar="NODE:NAME:=VALUE",
        help="a parameter for one node of the graph on top of its config/*.yaml, e.g. "
        "chunk_executor:implausible_speed:=reject (repeatable; written into the report)",
    )
    add_lockstep_argument(p)
    p.add_argument(
        "--compare",
        default="",
        metavar="NODE:PARAM=V1,V2[,...]",
        help="A/B evaluation: one graph per value of one node parameter, the same seeds interleaved (seed "
        "s with V1, then V2, ...); the report adds each variant's success rate with its Wilson interval "
        "and paired exact McNemar tests on the per-seed outcomes (use with --lockstep: in real time the "
        "idle graphs keep running and load the machine)",
    )
    p.add_argument("--no-videos", action="store_false", dest="videos", help="skip the videos")
    p.add_argument(
        "--continue",
        action="store_true",
        dest="resume",
        help="take up the report already in --out: keep its episodes and run only the layouts it lacks (more "
        "--episodes, an interrupted run, lockstep faults); the other settings must be the same",
    )
    par = p.add_argument_group("parallel evaluation (lockstep; para_ros.deploy.parallel_eval)")
    par.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="run the layouts in N contiguous shards side by side, each graph in its own ROS domain, joined into "
        "the serial run's report (OUT/shards holds each shard); 1..the machine's cores, with --lockstep",
    )
    par.add_argument(
        "--print-commands",
        action="store_true",
        help="print the shard commands (for a cluster's job scheduler) instead of running them",
    )
    par.add_argument(
        "--report-only",
        action="store_true",
        help="join the shard reports already in OUT/shards into OUT's report (after running the printed commands)",
    )
    add_region_argument(p)
    p.add_argument("--echo", action="store_true", help="show the nodes' output instead of logging it")
    p.add_argument(
        "--rerun",
        default="",
        metavar="FILE.rrd",
        help="also record the run (OUT/recording, images at 2 Hz) and write it as a rerun recording: posed "
        "cameras, trajectory, chunks, voxel clouds (open with: rerun FILE.rrd)",
    )


def cmd_eval(args) -> int:
    # rclpy, OpenCV, matplotlib: loaded for the evaluation only (demos and expert stay ROS-free)
    from para_ros.deploy.ab_compare import run_compare
    from para_ros.deploy.closed_loop import run_eval

    checkpoint = args.checkpoint or graph.shipped_checkpoint()
    if not checkpoint:
        print(f"para-sim eval: no --checkpoint given and no shipped {graph.SIM_CHECKPOINT} here", file=sys.stderr)
        return 2
    try:
        settings = eval_settings(args, checkpoint)
    except ValueError as exc:
        print(f"para-sim eval: {exc}", file=sys.stderr)
        return 2
    if args.jobs > 1 or args.print_commands or args.report_only:
        return _parallel_eval(args, settings)
    return run_compare(settings) if settings.compare else run_eval(settings)


def eval_settings(args, checkpoint: str):
    """The ``EvalSettings`` of parsed ``para-sim eval`` options (ValueError for a bad value)."""
    from para_ros.deploy.closed_loop import EvalSettings

    return EvalSettings(
        checkpoint=checkpoint,
        episodes=args.episodes,
        seed=args.seed,
        out=args.out,
        time_limit_s=args.time_limit_s,
        settle_s=args.settle_s,
        camera_shift_m=tuple(args.camera_shift_m),
        camera_rotate_deg=tuple(args.camera_rotate_deg),
        cube_rgba=tuple(args.cube_rgba),
        light_scale=args.light_scale,
        device=args.device,
        fast_path=args.fast_path,
        videos=args.videos,
        echo=args.echo,
        node_params=graph.parse_node_params(args.node_param),
        cube_region=args.cube_region.text if args.cube_region else "",
        rerun=args.rerun or "",
        lockstep=args.lockstep,
        compare=args.compare,
        resume=args.resume,
    )


def _parallel_eval(args, settings) -> int:
    """``--jobs N`` / ``--print-commands`` / ``--report-only`` (para_ros.deploy.parallel_eval)."""
    from para_ros.deploy import parallel_eval as par
    from para_ros.deploy.closed_loop import eval_seeds

    try:
        par.check_jobs(args.jobs, settings.lockstep, here=not (args.print_commands or args.report_only))
        if settings.compare or settings.resume or settings.rerun:
            raise ValueError("--jobs / --print-commands / --report-only: not with --compare, --continue or --rerun")
        if not settings.out:
            raise ValueError("--jobs / --print-commands / --report-only need --out (the shards go in OUT/shards)")
        seeds = eval_seeds(settings)
        out = Path(settings.out)
        commands = par.shard_commands(settings, seeds, max(args.jobs, 1), out)
        if args.print_commands:
            for cmd in commands:
                print(shlex.join(cmd))
            print(f"# then: para-sim eval ... --out {out} --report-only  (the same options)")
            return 0
        if not args.report_only:
            if (out / par.SHARDS_DIR).exists():
                raise ValueError(f"{out / par.SHARDS_DIR} exists: use another --out, or --report-only to join it")
            statuses = par.run_commands(commands, len(commands))
            if any(statuses):
                print(
                    f"para-sim eval: shard exit statuses {statuses}; see {out / par.SHARDS_DIR}/*.log", file=sys.stderr
                )
        summary = par.join_shards(out, settings, seeds)
    except ValueError as exc:
        print(f"para-sim eval: {exc}", file=sys.stderr)
        return 2
    lo, hi = summary["wilson95"]
    print(
        f"para-sim eval: {summary['successes']}/{summary['episodes']} successes ({100 * summary['success_rate']:.1f} %, 95 % "
        f"Wilson interval {100 * lo:.1f}..{100 * hi:.1f} %) from {len(commands)} shard(s); report {out / 'report.md'}"
    )
    return 0


def cmd_record(args) -> int:
    from para_ros.deploy.sim_recorder import record_episodes  # rclpy: demos and expert stay ROS-free

    try:
        seeds = episode_seeds(args.seed, args.episodes, getattr(args, "cube_region", None))
        cameras = randomisation_from_args(args)
    except ValueError as exc:
        print(f"para-sim record: {exc}", file=sys.stderr)
        return 2
    try:
        counts = record_episodes(
            Path(args.out),
            args.episodes,
            args.seed,
            keep_failures=args.keep_failures,
            progress=not args.no_progress,
            echo=args.echo,
            seeds=seeds,
            cameras=cameras,
            sim_overrides={"calibration_marker": "flange"} if args.calibration_marker else None,
        )
    except (RuntimeError, ValueError) as exc:
        print(f"para-sim record: {exc}", file=sys.stderr)
        return 1
    print(
        f"para-sim record: {counts.get('success', 0)} successful bags in {args.out} (outcomes {counts}); "
        f"next: para-bag extract {args.out}/episode_XXXXXX --out data/episode_XXXXXX --fps 10"
    )
    return 0


def _sim_and_kinematics(n_distractor_slots: int = 0, calibration_marker: bool = False):
    os.environ.setdefault("MUJOCO_GL", "egl")
    from para_ros.sim.yam_scene import SimConfig, YamSim  # mujoco: loaded on first use, not on import

    extras = ()
    if calibration_marker:  # OpenCV (the marker's image): loaded only when asked
        from para_core.calibration.marker import ArucoMarkerSpec
        from para_ros.sim.calibration_marker import MarkerMount

        extras = (MarkerMount(ArucoMarkerSpec()),)
    return YamSim(SimConfig(n_distractor_slots=n_distractor_slots, scene_extras=extras)), YamKinematics()


def _progress(total: int, disable: bool, desc: str):
    from tqdm import tqdm  # tqdm: loaded on first use, not on import

    return tqdm(total=total, disable=disable, desc=desc, unit="ep", dynamic_ncols=True)


def cmd_demos(args) -> int:
    from para_ros.sim.demonstrations import frames_to_episode, run_expert  # mujoco: loaded on first use, not on import

    if not 32 <= args.image_size <= 1024:
        print(f"para-sim demos: --image-size {args.image_size} must be within 32..1024", file=sys.stderr)
        return 2
    if not 1.0 <= args.fps <= 60.0:
        print(f"para-sim demos: --fps {args.fps} must be within 1..60 Hz", file=sys.stderr)
        return 2
    try:
        seeds = episode_seeds(args.seed, args.episodes, args.cube_region)
        cameras = randomisation_from_args(args, args.image_size)
        rigs = rig_from_args(args)
    except ValueError as exc:
        print(f"para-sim demos: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sim, kin = _sim_and_kinematics(rigs.max_distractors if rigs is not None else 0, args.calibration_marker)
    counts: dict[str, int] = {}
    written = 0
    with _progress(len(seeds), args.no_progress, "expert demos") as bar:
        for seed in seeds:
            path = out / f"episode_{seed:06d}"
            if (path / "meta.json").exists():  # resumable: an interrupted run continues where it stopped
                bar.update(1)
                continue
            camera = cameras.sample(seed) if cameras is not None else None
            if camera is not None:
                apply_to_sim(sim, camera)  # every frame then records this true pose and its intrinsics
            layout = sample_layout(seed)
            rig = rigs.sample(seed, layout) if rigs is not None else None
            if rig is not None:
                apply_rig(sim, rig)  # the wrist camera's true pose and field of view go into every frame
            r = run_expert(sim, kin, layout, record=True, fps=args.fps, image_size=args.image_size)
            counts[r.outcome] = counts.get(r.outcome, 0) + 1
            if r.outcome == "success" or args.keep_failures:
                meta = {
                    "source": "para-sim demos",
                    "task": "pick_place",
                    "layout": r.layout.to_dict(),
                    "expert_outcome": r.outcome,
                    "place_error_m": r.place_error_m,
                    "image_size": args.image_size,
                }
                if camera is not None:
                    meta["scene_camera"] = {**camera.to_dict(), "randomisation": cameras.to_dict()}
                if rig is not None:
                    meta["rig"] = {**rig.to_dict(), "randomisation": rigs.to_dict()}
                if args.cube_region is not None:
                    meta["cube_region"] = args.cube_region.text
                if args.calibration_marker:
                    meta["calibration_marker"] = "flange"
                frames_to_episode(r.frames, args.fps, meta).save(path)
                written += 1
            bar.update(1)
            bar.set_postfix(counts)
    print(f"para-sim demos: {written} episodes written to {out} (expert outcomes: {counts})")
    return 0


def cmd_expert(args) -> int:
    from para_ros.sim.demonstrations import run_expert  # mujoco: loaded on first use, not on import

    sim, kin = _sim_and_kinematics()
    rows = []
    with _progress(args.episodes, args.no_progress, "expert") as bar:
        for k in range(args.episodes):
            r = run_expert(sim, kin, sample_layout(args.seed + k), record=False)
            rows.append({"seed": args.seed + k, "outcome": r.outcome, "place_error_m": r.place_error_m})
            bar.update(1)
    n_ok = sum(r["outcome"] == "success" for r in rows)
    lo, hi = wilson_interval(n_ok, len(rows))
    print(
        f"expert: {n_ok}/{len(rows)} successes ({100 * n_ok / len(rows):.1f} %, 95 % Wilson interval "
        f"{100 * lo:.1f}..{100 * hi:.1f} %), seeds {args.seed}..{args.seed + args.episodes - 1}"
    )
    if args.out:
        Path(args.out).write_text(json.dumps({"episodes": rows, "successes": n_ok, "wilson95": [lo, hi]}, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    t0 = time.monotonic()
    if args.command == "demos":
        rc = cmd_demos(args)
    elif args.command == "expert":
        rc = cmd_expert(args)
    elif args.command == "record":
        rc = cmd_record(args)
    elif args.command == "sweep":
        rc = cmd_sweep(args)
    elif args.command == "agreement":
        rc = cmd_agreement(args)
    elif args.command == "suite":
        rc = cmd_suite(args)
    elif args.command == "confidence-report":
        rc = cmd_confidence_report(args)
    elif args.command == "supervisor-table":
        rc = cmd_supervisor_table(args)
    else:
        rc = cmd_eval(args)
    print(f"para-sim {args.command}: {time.monotonic() - t0:.1f} s")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
