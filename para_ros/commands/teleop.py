"""``para-teleop``: record demonstrations by teleoperation: a leader arm drives the follower through the chunk executor
(its limits, watchdogs and engage / disengage), and each episode is written as its own rosbag2 recording with a
``teleop.json`` (task, the operator's mark, the calibration used), ready for ``para-bag extract`` and ``para-bag
export-lerobot``.

    para-teleop --robot i2rt --leader i2rt --leader-channel can1 --engage --task "pick the cube" --out bags/pick
    para-teleop --robot i2rt --leader topic --task "pick the cube" --out bags/pick     # a GELLO on /leader/joint_states
    para-teleop --robot sim --scripted-leader 0 --episodes 5 --task "pick the cube, place it on the pad" --out bags/t
    para-teleop ... --out bags/pick --continue                          # more episodes after those in bags/pick

Keyboard: Enter (or start) starts an episode; stop ends it unmarked, s [NOTE] / f REASON end it marked success /
failure, d discards it (its recording deleted). The same on the topic /para_teleop/command, the episode named first
('3 failure dropped the cube'); answers on /para_teleop/feedback, the leader's state on /para_teleop/leader_state.
The follower follows only once the leader agrees with it (every joint within --sync-tolerance); it holds when the
leader's state stops (--leader-timeout) or jumps (--jump). Details: docs/teleop.md.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("MUJOCO_GL", "egl")  # robot sim: before anything imports mujoco


def build_parser() -> argparse.ArgumentParser:
    from para_ros.deploy.graph import BACKENDS
    from para_ros.teleop.leaders import LEADER_TOPIC, LEADERS

    parser = argparse.ArgumentParser(
        prog="para-teleop",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:3]),
    )
    parser.add_argument(
        "--robot", choices=BACKENDS, default="sim", help="the follower, as para-deploy --robot (default sim)"
    )
    parser.add_argument(
        "--leader",
        choices=tuple(LEADERS),
        default="topic",
        help="; ".join(f"{k.name}: {k.description}" for k in LEADERS.values()) + " (default topic)",
    )
    parser.add_argument(
        "--leader-topic", default=LEADER_TOPIC, help=f"the topic leader's JointState topic ({LEADER_TOPIC})"
    )
    parser.add_argument("--leader-channel", default="can1", help="the i2rt leader's CAN interface (default can1)")
    parser.add_argument(
        "--leader-joint-names",
        default="",
        help="the names the topic leader gives the follower's joints, comma-separated (default: config/yam.yaml's)",
    )
    parser.add_argument("--task", required=True, help="the task of the episodes (written into every teleop.json)")
    parser.add_argument("--out", required=True, help="the folder of the recordings (episode_NNNNNN/)")
    parser.add_argument(
        "--continue",
        dest="append",
        action="store_true",
        help="append episodes after the recordings already in --out (without it such a folder is refused)",
    )
    parser.add_argument("--episodes", type=int, default=0, help="end after this many kept episodes (default 0: Ctrl-C)")
    parser.add_argument("--max-episode-s", type=float, default=0.0, help="end an episode after this long (0: no limit)")
    parser.add_argument(
        "--calibration", default="", help="calibration.yaml of the rig (para-calib solve), as para-deploy"
    )
    parser.add_argument("--engage", action="store_true", help="a real arm: engage the executor at start")
    parser.add_argument(
        "--node-param", action="append", default=[], metavar="NODE:NAME:=VALUE", help="a node parameter (repeatable)"
    )
    parser.add_argument(
        "--scripted-leader",
        type=int,
        default=None,
        metavar="SEED",
        help="robot sim: the scripted expert leads (layout seed SEED + k for episode k) and marks each episode",
    )
    parser.add_argument("--rate", type=float, default=50.0, help="leader poses sent to the executor per second (50)")
    parser.add_argument("--leader-timeout", type=float, default=0.5, help="s without a leader state: hold (0.5)")
    parser.add_argument(
        "--sync-tolerance", type=float, default=0.15, help="rad: the leader takes the follower within this (0.15)"
    )
    parser.add_argument("--jump", type=float, default=0.5, help="rad between two leader states: a jump, hold (0.5)")
    parser.add_argument("--echo", action="store_true", help="the nodes' output here instead of OUT/logs/")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from para_ros.deploy.graph import parse_node_params
    from para_ros.teleop.session import TeleopSettings, run_teleop

    try:
        settings = TeleopSettings(
            robot=args.robot,
            leader=args.leader,
            leader_topic=args.leader_topic,
            leader_channel=args.leader_channel,
            leader_joint_names=args.leader_joint_names,
            task=args.task,
            out=args.out,
            append=args.append,
            episodes=args.episodes,
            max_episode_s=args.max_episode_s,
            calibration=args.calibration,
            engage=args.engage,
            node_params=parse_node_params(args.node_param),
            scripted_leader_seed=args.scripted_leader,
            rate_hz=args.rate,
            leader_timeout_s=args.leader_timeout,
            sync_tolerance_rad=args.sync_tolerance,
            jump_rad=args.jump,
        )
    except ValueError as exc:
        print(f"para-teleop: {exc}", file=sys.stderr)
        return 2
    return run_teleop(settings, echo=args.echo)


if __name__ == "__main__":
    raise SystemExit(main())
