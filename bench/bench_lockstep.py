"""Lockstep evaluation speed: wall seconds per simulated second of the per-tick protocol (one simulator -> executor ->
simulator round trip per 10 ms step, ``sim_node lockstep_batch:=false``) against the executor's ticks in batches
(para_ros.sim.lockstep rule 7, the default), both stepping on while the model computes (``lockstep_chunk_latency_s``
tied to the executor's latency); with ``--hold`` also the simulator holding at each frame (``lockstep_chunk_latency_s
0``, per tick). In the same run, interleaved, on the same layouts; every report figure but the wall time compared.

Each repeat runs ``para-sim eval --lockstep`` once per variant (``--episodes`` layouts from ``--seed``); the figure
is the sum of the episodes' wall times over the sum of their simulated durations (graph start-up excluded). Prints
the median over repeats of each variant and their ratios, with the machine, its load and the settings.

Usage::

    python -m para_ros.dds_env -- python bench/bench_lockstep.py --episodes 3 --repeats 2 \\
        [--latency-s 0.2] [--checkpoint checkpoints/pick_place] [--hold] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

NOT_COMPARED = ("wall_s",)  # every other figure of a report row must be equal across variants

# name -> sim_node parameters of the variant
VARIANTS = {
    "per tick (before)": {"lockstep_batch": "false"},
    "batches (default)": {},
}
HOLD = ("hold at the frame, per tick", {"lockstep_batch": "false", "lockstep_chunk_latency_s": "0.0"})


def _figures(report: dict) -> list[dict]:
    return [{k: v for k, v in e.items() if k not in NOT_COMPARED} for e in report["episodes"]]


def _run(out: Path, args, sim_params: dict, jobs: int = 1) -> dict:
    cmd = [sys.executable, "-m", "para_ros.commands.sim", "eval", "--lockstep", "--checkpoint", args.checkpoint,
           "--episodes", str(args.episodes), "--seed", str(args.seed), "--no-videos", "--out", str(out),
           "--node-param", f"chunk_executor:lockstep_latency_s:={args.latency_s}", "--jobs", str(jobs)]  # fmt: skip
    for name, value in sim_params.items():
        cmd += ["--node-param", f"sim_node:{name}:={value}"]
    t0 = time.monotonic()
    with open(out.with_suffix(".log"), "w") as log:
        subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT)
    report = json.loads((out / "report.json").read_text())
    report["command_wall_s"] = time.monotonic() - t0
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", default="checkpoints/pick_place")
    p.add_argument("--episodes", type=int, default=3)
    p.add_argument("--seed", type=int, default=100000)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--latency-s", type=float, default=0.2, help="the executor's lockstep_latency_s (default 0.2)")
    p.add_argument("--out", type=Path, default=Path("runs/bench_lockstep"))
    p.add_argument("--jobs", type=int, default=0, help="also time the whole command serial against --jobs N")
    p.add_argument("--hold", action="store_true", help="also the simulator holding at each frame (per tick)")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    variants = dict(VARIANTS)
    if args.hold:
        variants = {HOLD[0]: HOLD[1], **variants}
    rates: dict[str, list[float]] = {name: [] for name in variants}
    loads: list[float] = []
    rows: dict[str, list] = {}
    for k in range(args.repeats):
        for i, (name, sim_params) in enumerate(variants.items()):
            report = _run(args.out / f"{k}_{i}", args, sim_params)
            eps = report["episodes"]
            rates[name].append(sum(e["wall_s"] for e in eps) / sum(e["duration_s"] for e in eps))
            loads.append(os.getloadavg()[0])
            rows.setdefault(name, _figures(report))
            if _figures(report) != rows[name]:
                print(f"repeat {k} {name}: report rows differ from its first repeat", flush=True)
                rows[name] = None
            print(f"repeat {k} {name}: {rates[name][-1]:.2f} s wall per simulated s (load {loads[-1]:.1f})", flush=True)
    med = {n: statistics.median(v) for n, v in rates.items()}
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    print(f"load (1 min) after each run: {', '.join(f'{x:.1f}' for x in loads)}")
    print(f"settings: {args.episodes} episodes from seed {args.seed}, latency {args.latency_s} s, {args.checkpoint}")
    for n, v in med.items():
        print(f"  {n:28s} median {v:.2f} s wall per simulated s  (runs: {', '.join(f'{x:.2f}' for x in rates[n])})")
    base = "per tick (before)"
    for n in med:
        if n != base:
            print(f"  {base} / {n}: {med[base] / med[n]:.2f}x")
    ratios = [a / b for a, b in zip(rates[base], rates["batches (default)"])]
    print(f"  per-repeat ratio per tick / batches (same repeat, back to back): {', '.join(f'{r:.2f}' for r in ratios)}")
    first = rows[base]
    same = first is not None and all(r == first for r in rows.values())
    print(f"  report rows identical (every figure but wall_s, every variant and repeat): {same}")
    if args.jobs > 1:
        serial = _run(args.out / "jobs_1", args, {})
        parallel = _run(args.out / f"jobs_{args.jobs}", args, {}, jobs=args.jobs)
        ratio = serial["command_wall_s"] / parallel["command_wall_s"]
        par_same = _figures(parallel) == _figures(serial)
        same = same and par_same
        print(
            f"  whole command, {args.episodes} episodes: serial {serial['command_wall_s']:.1f} s, --jobs {args.jobs} "
            f"{parallel['command_wall_s']:.1f} s: {ratio:.2f}x; outcomes identical: {par_same}"
        )
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
