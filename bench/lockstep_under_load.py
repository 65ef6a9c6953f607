"""Lockstep outcomes against the machine's load: the same layouts evaluated twice, the second time beside busy
processes that keep the load average above 10, and every per-episode figure compared.

Run A evaluates layouts ``seed .. seed + episodes - 1``; run B evaluates ``seed - 1 .. seed + episodes - 1`` (one
layout more, first), so that layout ``seed`` is the first episode of A and the second of B: the first episode after
the graph's start must equal the same layout later in a run. During B, ``--load-procs`` busy loops run at
``--load-nice`` (niceness 10 by default: they raise the load average and take CPU time from the graph without
starving it for hours); the load average is sampled every 5 s and printed. Outcomes, simulated durations, place
errors, lifts and chunk counts must be identical; wall times are not compared. A finished run A in ``--out`` is
kept (e.g. run before a change of the lockstep code: B then also compares before and after it).

Usage::

    python bench/lockstep_under_load.py --checkpoint checkpoints/pick_place --episodes 30 --out runs/load \\
        [--eval-arg=--node-param --eval-arg=chunk_executor:lockstep_latency_s:=0.2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

COMPARED = ("outcome", "duration_s", "place_error_m", "max_lift_m", "chunks", "chunks_rejected")
BUSY_LOOP = "while True: pass"


def _eval(out: Path, checkpoint: str, seed: int, episodes: int, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "para_ros.commands.sim", "eval", "--lockstep", "--checkpoint", checkpoint,
           "--episodes", str(episodes), "--seed", str(seed), "--no-videos", "--out", str(out), *extra]  # fmt: skip
    print("+", " ".join(cmd), flush=True)
    with open(out.with_suffix(".log"), "w") as log:
        subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT)
    return json.loads((out / "report.json").read_text())


class LoadSampler(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.samples: list[float] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(5.0):
            self.samples.append(os.getloadavg()[0])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", default="checkpoints/pick_place")
    p.add_argument("--episodes", type=int, default=30)
    p.add_argument("--seed", type=int, default=100000)
    p.add_argument("--load-procs", type=int, default=10, help="busy loops beside run B (default 10)")
    p.add_argument("--load-nice", type=int, default=10, help="their niceness (default 10)")
    p.add_argument("--out", type=Path, default=Path("runs/lockstep_under_load"))
    p.add_argument("--eval-arg", action="append", default=[], help="passed to both para-sim eval runs")
    args = p.parse_args(argv)
    if args.episodes < 1 or args.load_procs < 0 or not 0 <= args.load_nice <= 19:
        p.error("--episodes >= 1, --load-procs >= 0, --load-nice within 0..19")
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    quiet = args.out / "quiet" / "report.json"
    seeds = list(range(args.seed, args.seed + args.episodes))
    if quiet.is_file() and [r["seed"] for r in json.loads(quiet.read_text())["episodes"]] == seeds:
        print(f"run A: {quiet} holds these layouts already (delete it to run A again)", flush=True)
        a = json.loads(quiet.read_text())
        wall_a = sum(r["wall_s"] for r in a["episodes"])
    else:
        a = _eval(args.out / "quiet", args.checkpoint, args.seed, args.episodes, args.eval_arg)
        wall_a = time.monotonic() - t0
    load_a = os.getloadavg()[0]
    busy = [subprocess.Popen(["nice", "-n", str(args.load_nice), sys.executable, "-c", BUSY_LOOP])
            for _ in range(args.load_procs)]  # fmt: skip
    sampler = LoadSampler()
    sampler.start()
    t1 = time.monotonic()
    try:
        b = _eval(args.out / "loaded", args.checkpoint, args.seed - 1, args.episodes + 1, args.eval_arg)
    finally:
        for proc in busy:
            proc.kill()
        sampler.done.set()
    wall_b = time.monotonic() - t1
    rows_a = {r["seed"]: r for r in a["episodes"]}
    rows_b = {r["seed"]: r for r in b["episodes"]}
    differ = []
    for seed, ra in sorted(rows_a.items()):
        rb = rows_b.get(seed)
        keys = [k for k in COMPARED if rb is None or ra[k] != rb[k]]
        if keys:
            differ.append({"seed": seed, "fields": keys, "quiet": {k: ra[k] for k in keys},
                           "loaded": {k: (rb or {}).get(k) for k in keys}})  # fmt: skip
    faults = sum(r["outcome"] == "fault" for r in [*a["episodes"], *b["episodes"]])
    loads = sampler.samples or [os.getloadavg()[0]]
    result = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "checkpoint": args.checkpoint,
        "seeds": [args.seed, args.seed + args.episodes - 1],
        "eval_args": args.eval_arg,
        "load": {
            "procs": args.load_procs,
            "nice": args.load_nice,
            "quiet_end": load_a,
            "loaded_min": min(loads),
            "loaded_median": statistics.median(loads),
            "loaded_max": max(loads),
        },  # fmt: skip
        "wall_s": {"quiet": wall_a, "loaded": wall_b},
        "identical": args.episodes - len(differ),
        "episodes": args.episodes,
        "faults": faults,
        "first_episode_layout_identical": not any(d["seed"] == args.seed for d in differ),
        "successes": {
            "quiet": sum(r["outcome"] == "success" for r in a["episodes"]),
            "loaded": sum(rows_b[s]["outcome"] == "success" for s in rows_a if s in rows_b),
        },  # fmt: skip
        "differ": differ,
    }
    (args.out / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "differ"}, indent=1))
    for d in differ:
        print("DIFFERS", d)
    return 0 if not differ and not faults else 1


if __name__ == "__main__":
    raise SystemExit(main())
