"""``para-sim eval --jobs N``: the layouts of one evaluation split into N contiguous shards, each a ``para-sim eval``
of its own in its own ROS domain, run side by side, their reports joined into the one report a serial run writes.

Lockstep only: a lockstep outcome depends on the layout's seed alone, not on the machine's load nor on where in a
run the layout comes (the first episode after the graph's start equals the same layout later in a run), so the
joined report equals the serial one apart from wall times. ``--print-commands`` prints the shard commands instead of
running them (for a cluster's job scheduler: Slurm arrays, Ray); ``--report-only`` joins the shard reports already
in ``OUT/shards``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

SHARDS_DIR = "shards"


def _num(value: float) -> str:
    """A float as a command-line word that reads back exactly and never looks like an option (``-1e-16`` would:
    argparse takes only plain negative decimals for numbers)."""
    import numpy as np

    return np.format_float_positional(float(value), unique=True, trim="0")


def eval_argv(settings) -> list[str]:
    """The ``para-sim eval`` arguments (after ``eval``) that make ``settings`` (an ``EvalSettings``): what a shard,
    a sweep's cell or a cluster's job runs. ValueError for a setting the command line cannot say."""
    from dataclasses import asdict

    from para_ros.deploy.closed_loop import EvalSettings

    d, default = asdict(settings), asdict(EvalSettings(checkpoint=""))
    unsaid = [k for k in ("success_hold_s", "compare", "rerun", "echo") if d[k] != default[k]]
    if unsaid:
        raise ValueError(f"a parallel evaluation runs without {unsaid} (set on the command line of each job)")
    argv = ["--checkpoint", str(d["checkpoint"]), "--episodes", str(d["episodes"]), "--seed", str(d["seed"])]
    argv += ["--time-limit", _num(d["time_limit_s"]), "--settle", _num(d["settle_s"])]
    if d["out"]:
        argv += ["--out", str(d["out"])]
    if any(d["camera_shift_m"]):
        argv += ["--camera-shift", *(_num(v) for v in d["camera_shift_m"])]
    if any(d["camera_rotate_deg"]):
        argv += ["--camera-rotate", *(_num(v) for v in d["camera_rotate_deg"])]
    if d["cube_rgba"]:
        argv += ["--cube-rgba", *(_num(v) for v in d["cube_rgba"])]
    if d["light_scale"] != default["light_scale"]:
        argv += ["--light-scale", _num(d["light_scale"])]
    if d["device"]:
        argv += ["--device", d["device"]]
    if d["fast_path"]:
        argv.append("--fast-path")
    if not d["videos"]:
        argv.append("--no-videos")
    if d["cube_region"]:
        argv += ["--cube-region", d["cube_region"]]
    if d["lockstep"]:
        argv.append("--lockstep")
    if d["resume"]:
        argv.append("--continue")
    for node, params in sorted((d["node_params"] or {}).items()):
        for name, value in params.items():
            argv += ["--node-param", f"{node}:{name}:={json.dumps(value)}"]
    return argv


def check_jobs(jobs: int, lockstep: bool, cores: int | None = None, here: bool = True) -> None:
    """ValueError naming the rule for a ``--jobs`` value this machine or mode cannot take; ``here``: the shards run
    on this machine (not printed for a scheduler), so at most one a core."""
    cores = cores or os.cpu_count() or 1
    if int(jobs) < 1 or (here and int(jobs) > cores):
        raise ValueError(
            f"--jobs {jobs}: use 1..{cores} (this machine's cores; each job runs a whole graph; more only with "
            "--print-commands, for a cluster)"
        )
    if int(jobs) > 1 and not lockstep:
        raise ValueError(
            f"--jobs {jobs} needs --lockstep: in real time each episode's outcome depends on the machine's load, so "
            "parallel episodes would not be the serial evaluation"
        )


def shard_seeds(seeds: list[int], jobs: int) -> list[list[int]]:
    """``seeds`` in ``jobs`` contiguous shards of near-equal size (none empty), in order."""
    jobs = max(1, min(int(jobs), len(seeds)))
    size, extra = divmod(len(seeds), jobs)
    out, start = [], 0
    for k in range(jobs):
        n = size + (1 if k < extra else 0)
        out.append(seeds[start : start + n])
        start += n
    return out


def eval_command(settings) -> list[str]:
    """The whole command line of one ``para-sim eval`` of ``settings``."""
    return [sys.executable, "-m", "para_ros.commands.sim", "eval", *eval_argv(settings)]


def shard_commands(settings, seeds: list[int], jobs: int, out: Path) -> list[list[str]]:
    """One command a shard: ``settings`` with the shard's first layout, size and folder ``OUT/shards/NN``. Layouts
    within a shard are consecutive in ``seeds`` (a cube-region filter applies to the shard as to the whole)."""
    return [
        eval_command(replace(settings, seed=shard[0], episodes=len(shard), out=str(out / SHARDS_DIR / f"{k:02d}")))
        for k, shard in enumerate(shard_seeds(seeds, jobs))
    ]


def run_commands(commands: list[list[str]], jobs: int) -> list[int]:
    """Run ``para-sim eval`` commands, at most ``jobs`` at a time, each in its own fresh ROS domain (loopback) with
    its output in ``OUT.log`` beside its ``--out``; their exit statuses, in order."""
    from para_ros.dds_env import loopback_dds_env, other_domain_ids

    domains = other_domain_ids(min(len(commands), max(1, jobs)))
    statuses: list[int | None] = [None] * len(commands)
    running: dict[int, tuple] = {}  # index -> (process, log, domain)
    todo = list(range(len(commands)))
    try:
        while todo or running:
            for i, (proc, log, domain) in list(running.items()):
                if proc.poll() is not None:
                    statuses[i] = proc.returncode
                    log.close()
                    domains.append(domain)
                    del running[i]
            while todo and len(running) < max(1, jobs):
                i = todo.pop(0)
                cmd = commands[i]
                out = Path(cmd[cmd.index("--out") + 1])
                out.parent.mkdir(parents=True, exist_ok=True)
                log = (out.parent / f"{out.name}.log").open("w")
                domain = domains.pop(0)
                print(f"para-sim: {out} in ROS_DOMAIN_ID {domain} (log {log.name})", flush=True)
                env = loopback_dds_env(domain_id=domain)
                running[i] = (subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT), log, domain)
            time.sleep(0.5)
    finally:
        for proc, log, _ in running.values():
            if proc.poll() is None:
                proc.terminate()
            proc.wait()
            log.close()
    return [-1 if s is None else s for s in statuses]


def run_evaluations(runs: list, jobs: int, print_commands: bool, lockstep: bool, command: str, out: Path) -> int:
    """``--jobs N`` / ``--print-commands`` of a command made of whole evaluations (a sweep's cells, a suite's
    conditions; ``runs``: their ``EvalSettings``, the ones still to do): each its own ``para-sim eval``, printed for a
    job scheduler or run ``jobs`` at a time. The exit status: 0; 1 when one did not finish (named on stderr, its log
    beside its folder); 2 for a ``--jobs`` this machine or mode cannot take, said before anything runs."""
    import shlex

    try:
        check_jobs(jobs, lockstep, here=not print_commands)
        commands = [eval_command(run) for run in runs]
    except ValueError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return 2
    if print_commands:
        for cmd in commands:
            print(shlex.join(cmd))
        print(f"# then: {command} ... --out {out} --report-only  (the same options)")
        return 0
    print(f"{command}: {len(commands)} evaluation(s) to run, {jobs} at a time", flush=True)
    statuses = run_commands(commands, jobs)
    failed = [str(Path(c[c.index("--out") + 1])) for c, rc in zip(commands, statuses) if rc != 0]
    if failed:
        print(f"{command}: these evaluations did not finish (see OUT.log beside each): {failed}", file=sys.stderr)
        return 1
    return 0


def join_shards(out: Path, settings, seeds: list[int]) -> dict:
    """Join ``OUT/shards/*/report.json`` (and their ``confidence.jsonl``) into ``OUT``'s report of ``settings``: rows
    in the order of ``seeds`` with the serial run's episode numbers. ValueError when a shard report is missing or was
    run with other settings than its share of these."""
    from para_ros.deploy.closed_loop import CONFIDENCE_FILE, kept_episodes, write_report
    from para_ros.deploy.episodes import EpisodeRow

    shard_dirs = sorted((out / SHARDS_DIR).glob("[0-9][0-9]"))
    if not shard_dirs:
        raise ValueError(f"no shard reports in {out / SHARDS_DIR} (run with --jobs N, or the printed commands)")
    index = {s: k for k, s in enumerate(seeds)}  # seed -> the serial run's episode number
    rows, confidence, interrupted = {}, [], False
    for d in shard_dirs:
        path = d / "report.json"
        if not path.is_file():
            raise ValueError(f"{path} is missing: that shard did not run (or not to its end); run it again")
        report = json.loads(path.read_text())
        shard = report.get("settings") or {}
        mine = replace(settings, seed=int(shard.get("seed", -1)), episodes=int(shard.get("episodes", 0)), out=str(d),
                       resume=False)  # fmt: skip
        kept_episodes(report, mine, seeds)  # refuses a shard of other settings, naming them
        for row in report.get("episodes") or []:  # faults too: the joined report counts them as a serial run does
            r = EpisodeRow.from_report(row)
            if r.seed in index:
                rows[r.seed] = r
        interrupted = interrupted or bool(report.get("interrupted"))
        if (d / CONFIDENCE_FILE).is_file():
            confidence += (d / CONFIDENCE_FILE).read_text().splitlines()
    joined = [replace(rows[s], episode=k) for k, s in enumerate(seeds) if s in rows]
    summary = write_report(out, settings, joined, {"interrupted": interrupted, "shards": len(shard_dirs)})
    lines = []
    for line in confidence:
        rec = json.loads(line)
        if rec.get("seed") in index:
            rec["episode"] = index[rec["seed"]]
            lines.append(json.dumps(rec))
    (out / CONFIDENCE_FILE).write_text("".join(f"{x}\n" for x in lines))
    return summary
