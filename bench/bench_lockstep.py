"""Lockstep evaluation speed: wall seconds per simulated second, the simulator holding at each frame (before) against
stepping on while the model computes (``sim_node lockstep_chunk_latency_s`` tied to the executor's latency, the
default), in the same run, interleaved, on the same layouts; outcomes compared too.

Each repeat runs ``para-sim eval --lockstep`` once per variant (``--episodes`` layouts from ``--seed``); the figure
is the sum of the episodes' wall times over the sum of their simulated durations (graph start-up excluded). Prints
the median over repeats of each variant and their ratio, with the machine and the settings.

Usage::

    python -m para_ros.dds_env -- python bench/bench_lockstep.py --episodes 3 --repeats 2 \\
        [--latency-s 0.2] [--checkpoint checkpoints/pick_place]
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

COMPARED = ("outcome", "duration_s", "place_error_m", "chunks")


def _run(out: Path, args, chunk_latency: float | None, jobs: int = 1) -> dict:
    cmd = [sys.executable, "-m", "para_ros.commands.sim", "eval", "--lockstep", "--checkpoint", args.checkpoint,
           "--episodes", str(args.episodes), "--seed", str(args.seed), "--no-videos", "--out", str(out),
           "--node-param", f"chunk_executor:lockstep_latency_s:={args.latency_s}", "--jobs", str(jobs)]  # fmt: skip
    if chunk_latency is not None:
        cmd += ["--node-param", f"sim_node:lockstep_chunk_latency_s:={chunk_latency}"]
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
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rates: dict[str, list[float]] = {"hold at the frame": [], "step on (default)": []}
    rows: dict[str, list] = {}
    for k in range(args.repeats):
        for name, chunk_latency in (("hold at the frame", 0.0), ("step on (default)", None)):
            report = _run(args.out / f"{k}_{'hold' if chunk_latency == 0.0 else 'stepon'}", args, chunk_latency)
            eps = report["episodes"]
            rates[name].append(sum(e["wall_s"] for e in eps) / sum(e["duration_s"] for e in eps))
            rows.setdefault(name, [{c: e[c] for c in COMPARED} for e in eps])
            print(f"repeat {k} {name}: {rates[name][-1]:.2f} s wall per simulated s", flush=True)
    med = {n: statistics.median(v) for n, v in rates.items()}
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
    )
    print(f"settings: {args.episodes} episodes from seed {args.seed}, latency {args.latency_s} s, {args.checkpoint}")
    for n, v in med.items():
        print(f"  {n:20s} median {v:.2f} s wall per simulated s  (runs: {', '.join(f'{x:.2f}' for x in rates[n])})")
    print(f"  speed-up {med['hold at the frame'] / med['step on (default)']:.2f}x")
    same = rows["hold at the frame"] == rows["step on (default)"]
    print(f"  outcomes identical: {same}")
    if args.jobs > 1:
        serial = _run(args.out / "jobs_1", args, None)
        parallel = _run(args.out / f"jobs_{args.jobs}", args, None, jobs=args.jobs)
        ratio = serial["command_wall_s"] / parallel["command_wall_s"]
        par_rows = [{c: e[c] for c in COMPARED} for e in parallel["episodes"]]
        same = same and par_rows == [{c: e[c] for c in COMPARED} for e in serial["episodes"]]
        print(
            f"  whole command, {args.episodes} episodes: serial {serial['command_wall_s']:.1f} s, --jobs {args.jobs} "
            f"{parallel['command_wall_s']:.1f} s: {ratio:.2f}x; outcomes identical: {par_rows == rows['step on (default)']}"
        )
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
