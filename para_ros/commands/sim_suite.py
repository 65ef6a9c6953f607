"""``para-sim suite``'s options and their translation into a :class:`para_ros.deploy.robustness_suite.SuiteSettings`
(the conditions, the runs, the table and the plot: ``para_ros.deploy.robustness_suite``)."""

from __future__ import annotations

import sys

from para_ros.commands.sim_sweep import parse_checkpoints
from para_ros.deploy import graph
from para_ros.deploy.robustness_suite import CONDITIONS, SuiteSettings, run_suite

DEFAULTS = SuiteSettings(checkpoints=(), out="")


def add_suite_arguments(p) -> None:
    """``para-sim suite``'s options."""
    p.add_argument(
        "--checkpoint",
        required=True,
        help="checkpoint directory, or LABEL=DIR[,LABEL=DIR...] to compare several on the same seeds",
    )
    p.add_argument("--conditions", nargs="*", default=[], help=f"subset to run (default all): {', '.join(CONDITIONS)}")
    p.add_argument("--episodes", type=int, default=DEFAULTS.episodes, help="episodes per condition (default 30)")
    p.add_argument("--seed", type=int, default=DEFAULTS.seed, help="layout seed of the first episode (default 100000)")
    p.add_argument("--out", required=True, help="suite folder (reports, suite.md, suite.json, suite.png)")
    p.add_argument("--node-param", action="append", default=[], metavar="NODE:NAME:=VALUE", help="as para-sim eval")
    p.add_argument(
        "--time-limit", type=float, default=DEFAULTS.time_limit_s, dest="time_limit_s", help="seconds per episode"
    )
    p.add_argument(
        "--latency-s",
        type=float,
        default=DEFAULTS.latency_s,
        help="simulated camera -> chunk latency in lockstep (chunk_executor lockstep_latency_s; default 0.2 s, "
        "the shipped policy's latency on 2 CPU cores); a --node-param for it wins",
    )
    p.add_argument("--device", default="", help="inference device (default: config/inference.yaml's)")
    p.add_argument("--no-lockstep", action="store_false", dest="lockstep", help="real time instead of lockstep")
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="run N evaluations (checkpoint x condition) side by side, each a para-sim eval in its own ROS domain "
        "(1..the machine's cores, lockstep only: the same results as one after another)",
    )
    p.add_argument(
        "--print-commands",
        action="store_true",
        help="print the para-sim eval command of every evaluation not done yet (for a cluster's job scheduler) and "
        "run nothing; --report-only then joins their reports",
    )
    p.add_argument("--report-only", action="store_true", help="only join the reports already in --out")
    p.add_argument("--dry-run", action="store_true", help="print the conditions and exit")


def suite_settings(args) -> SuiteSettings:
    """The ``SuiteSettings`` of parsed ``para-sim suite`` options (ValueError for a bad ``--checkpoint`` or
    ``--node-param``)."""
    return SuiteSettings(
        checkpoints=tuple(parse_checkpoints(args.checkpoint)),
        out=args.out,
        conditions=tuple(args.conditions),
        episodes=args.episodes,
        seed=args.seed,
        node_params=graph.parse_node_params(args.node_param),
        time_limit_s=args.time_limit_s,
        latency_s=args.latency_s,
        device=args.device,
        lockstep=args.lockstep,
        report_only=args.report_only,
        dry_run=args.dry_run,
        jobs=args.jobs,
        print_commands=args.print_commands,
    )


def cmd_suite(args) -> int:
    try:
        settings = suite_settings(args)
    except ValueError as exc:
        print(f"para-sim suite: {exc}", file=sys.stderr)
        return 2
    return run_suite(settings)
