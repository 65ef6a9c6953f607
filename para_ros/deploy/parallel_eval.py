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
# Options of the parent command that a shard does not take (it gets its own --seed, --episodes and --out).
_PARENT_ONLY = {"--jobs": 1, "--out": 1, "--seed": 1, "--episodes": 1, "--continue": 0, "--print-commands": 0,
                "--report-only": 0}  # fmt: skip


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


def shard_argv(argv: list[str], shard: list[int], out: Path) -> list[str]:
    """The ``para-sim eval`` arguments of one shard: ``argv`` (the parent's, after ``eval``) without the options of
    :data:`_PARENT_ONLY`, then the shard's first seed, size and output folder. Seeds within a shard are consecutive
    layouts of the parent's list (a cube-region filter applies to both alike)."""
    kept, i = [], 0
    while i < len(argv):
        name, eq, _ = argv[i].partition("=")
        if name in _PARENT_ONLY:
            i += 1 + (0 if eq else _PARENT_ONLY[name])
            continue
        kept.append(argv[i])
        i += 1
    return [*kept, "--seed", str(shard[0]), "--episodes", str(len(shard)), "--out", str(out)]


def shard_commands(argv: list[str], seeds: list[int], jobs: int, out: Path) -> list[list[str]]:
    return [
        [sys.executable, "-m", "para_ros.commands.sim", "eval", *shard_argv(argv, shard, out / SHARDS_DIR / f"{k:02d}")]
        for k, shard in enumerate(shard_seeds(seeds, jobs))
    ]


def _distinct_domains(n: int) -> list[int]:
    from para_ros.dds_env import DOMAIN_ID_RANGE, fresh_domain_id

    taken = {int(os.environ.get("ROS_DOMAIN_ID", "0") or 0)}
    out = []
    while len(out) < n:
        d = fresh_domain_id()
        if d not in taken and DOMAIN_ID_RANGE[0] <= d <= DOMAIN_ID_RANGE[1]:
            taken.add(d)
            out.append(d)
    return out


def run_shards(commands: list[list[str]], say=print) -> list[int]:
    """Start every shard command in its own fresh ROS domain (loopback), wait for all; their exit statuses."""
    from para_ros.dds_env import loopback_dds_env

    procs = []
    for cmd, domain in zip(commands, _distinct_domains(len(commands))):
        out = Path(cmd[cmd.index("--out") + 1])
        out.mkdir(parents=True, exist_ok=True)
        log = (out.parent / f"{out.name}.log").open("w")
        say(f"para-sim eval: shard {out.name} in ROS_DOMAIN_ID {domain}: {' '.join(cmd[3:])}")
        procs.append((subprocess.Popen(cmd, env=loopback_dds_env(domain_id=domain), stdout=log,
                                       stderr=subprocess.STDOUT), log))  # fmt: skip
    try:
        while any(p.poll() is None for p, _ in procs):
            time.sleep(1.0)
    finally:
        for p, log in procs:
            if p.poll() is None:
                p.terminate()
            p.wait()
            log.close()
    return [p.returncode for p, _ in procs]


def join_shards(out: Path, settings, seeds: list[int]) -> dict:
    """Join ``OUT/shards/*/report.json`` (and their ``confidence.jsonl``) into ``OUT``'s report of ``settings``: rows
    in the order of ``seeds`` with the serial run's episode numbers. ValueError when a shard report is missing or was
    run with other settings than its share of these."""
    from para_ros.deploy.closed_loop import CONFIDENCE_FILE, kept_episodes, write_report
    from para_ros.deploy.episodes import EpisodeRow

    shard_dirs = sorted((out / SHARDS_DIR).glob("[0-9][0-9]"))
    if not shard_dirs:
        raise ValueError(f"no shard reports in {out / SHARDS_DIR} (run with --jobs N, or the printed commands)")
    if (out / "report.json").is_file() and not (out / SHARDS_DIR).is_dir():
        raise ValueError(f"{out} holds a serial report: not overwritten by a join")
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
            r = EpisodeRow(**row)
            if r.seed in set(seeds):
                rows[r.seed] = r
        interrupted = interrupted or bool(report.get("interrupted"))
        if (d / CONFIDENCE_FILE).is_file():
            confidence += (d / CONFIDENCE_FILE).read_text().splitlines()
    joined = [replace(rows[s], episode=k) for k, s in enumerate(seeds) if s in rows]
    summary = write_report(out, settings, joined, {"interrupted": interrupted, "shards": len(shard_dirs)})
    index = {s: k for k, s in enumerate(seeds)}
    lines = []
    for line in confidence:
        rec = json.loads(line)
        if rec.get("seed") in index:
            rec["episode"] = index[rec["seed"]]
            lines.append(json.dumps(rec))
    (out / CONFIDENCE_FILE).write_text("".join(f"{x}\n" for x in lines))
    return summary
