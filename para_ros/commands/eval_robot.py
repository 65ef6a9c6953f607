"""``para-eval-robot``: operator-judged evaluation of one or more policies on a robot (or the simulator), in a
balanced order, with the report of ``para-sim eval`` (success rates with 95 % Wilson intervals, the paired exact
McNemar test, failure reasons, per-episode times) rewritten after every episode.

    para-eval-robot --robot i2rt --engage --out runs/robot_ab --episodes 20 \\
        --variant A=checkpoints/pick_place --variant B=runs/new/checkpoint,inference_node:decoding:=fused
    para-eval-robot ... --out runs/robot_ab --episodes 20 --continue     # after a stop: the rest, same order

The operator answers each prompt on the keyboard (Enter: start; s / f REASON / v REASON: success, failure, void) or
on the topics ``/para_eval_robot/start`` (``EPISODE``) and ``/para_eval_robot/mark`` (``EPISODE success|failure|void
[REASON]``); prompts go out on ``/para_eval_robot/prompt``, answers on ``/para_eval_robot/feedback``. The rules are in
:mod:`para_ros.deploy.robot_eval`, the running in :mod:`para_ros.deploy.robot_eval_run`; docs/evaluation.md has the
whole procedure.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("MUJOCO_GL", "egl")  # backend sim: before anything imports mujoco


def build_parser() -> argparse.ArgumentParser:
    from para_ros.deploy.graph import BACKENDS
    from para_ros.deploy.robot_eval import ORDERS

    parser = argparse.ArgumentParser(
        prog="para-eval-robot",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:3]),
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="LABEL=CHECKPOINT_DIR[,inference_node:PARAM:=VALUE...]",
        help="a policy under test (repeat for an A/B); its inference node parameters on top of the run's",
    )
    parser.add_argument("--episodes", type=int, default=20, help="episodes in all, over every variant (default 20)")
    parser.add_argument(
        "--order",
        choices=ORDERS,
        default="abba",
        help="abba (default): rounds of every variant, "
        "every other round reversed; random: each round shuffled with --order-seed (recorded)",
    )
    parser.add_argument("--order-seed", type=int, default=0, help="seeds the generator of --order random (default 0)")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=60.0,
        help="seconds from the hand-over to the policy until the arm is held and a mark is asked for (default 60)",
    )
    parser.add_argument(
        "--settle", type=float, default=1.0, help="seconds between 'start' and the hand-over (default 1)"
    )
    parser.add_argument(
        "--robot",
        choices=BACKENDS,
        default="sim",
        help="the robot, as para-deploy --robot (default sim: the simulated YAM)",
    )
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="",
        help="deprecated name of --robot (still accepted, with a warning)",
    )
    parser.add_argument(
        "--engage",
        action="store_true",
        help="a real arm: engage the executor at start (else call /chunk_executor/engage before the first episode)",
    )
    parser.add_argument(
        "--node-param",
        action="append",
        default=[],
        metavar="NODE:NAME:=VALUE",
        help="a node parameter for every variant (repeatable)",
    )
    parser.add_argument(
        "--calibration", default="", help="calibration.yaml of the rig's cameras (para-calib solve), as para-deploy"
    )
    parser.add_argument("--device", default="", help="the inference node's torch device (default: config's)")
    parser.add_argument("--no-record", action="store_true", help="no per-episode rosbag2 recording")
    parser.add_argument("--out", required=True, help="the evaluation's folder (report.json, report.md, episodes/)")
    parser.add_argument(
        "--continue",
        dest="resume",
        action="store_true",
        help="resume the evaluation in --out: "
        "keep its episodes, run the rest in the same order (same settings; --episodes may grow)",
    )
    parser.add_argument("--echo", action="store_true", help="the nodes' output here instead of OUT/logs/")
    return parser


def settings_from_args(args):
    """The :class:`~para_ros.deploy.robot_eval.RobotEvalSettings` of parsed arguments (ValueError: bad input)."""
    from para_ros.deploy.graph import parse_node_params, resolve_robot
    from para_ros.deploy.robot_eval import RobotEvalSettings, parse_variant

    return RobotEvalSettings(
        variants=[parse_variant(v) for v in args.variant],
        episodes=args.episodes,
        order=args.order,
        order_seed=args.order_seed,
        time_limit_s=args.time_limit,
        settle_s=args.settle,
        backend=resolve_robot(args.robot, args.backend),  # --backend: the robot's deprecated name (warns)
        node_params=parse_node_params(args.node_param),
        calibration=args.calibration,
        device=args.device,
        record=not args.no_record,
        out=args.out,
        resume=args.resume,
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = settings_from_args(args)
    except ValueError as exc:
        print(f"para-eval-robot: {exc}", file=sys.stderr)
        return 2
    from para_ros.deploy.robot_eval_run import run_robot_eval

    return run_robot_eval(settings, engage=args.engage, echo=args.echo)


if __name__ == "__main__":
    raise SystemExit(main())
