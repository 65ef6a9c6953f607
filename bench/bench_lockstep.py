"""Lockstep evaluation speed: wall seconds per simulated second of the per-tick protocol (one simulator -> executor ->
simulator round trip per 10 ms step, ``sim_node lockstep_batch:=false``) against the executor's ticks in batches
(para_ros.sim.lockstep rule 7, the default), both stepping on while the model computes (``lockstep_chunk_latency_s``
tied to the executor's latency); with ``--hold`` also the simulator holding at each frame (``lockstep_chunk_latency_s
0``, per tick). In the same run, interleaved, on the same layouts; every report figure but the wall time compared.

Each repeat runs ``para-sim eval --lockstep`` once per variant (``--episodes`` layouts from ``--seed``); the figure
is the sum of the episodes' wall times over the sum of their simulated durations (graph start-up excluded). Prints
the median over repeats of each variant and their ratios, with the machine, its load and the settings.

CPU: each process of the graph (simulator, inference node, executor, the evaluator itself) is sampled from /proc
while the command runs; its CPU seconds from the end of the first episode to the end of the last, over the simulated
seconds of the episodes in between (``duration_s``, as the wall figure), is its CPU-s per simulated s (start-up and
the first episode left out; unlike wall time it hardly depends on the machine's load). ``--baseline-tree DIR`` adds
the default variant run with the package at ``DIR`` (e.g. the main checkout: before and after a change, same run).

Usage::

    python -m para_ros.dds_env -- python bench/bench_lockstep.py --episodes 3 --repeats 2 \\
        [--latency-s 0.2] [--checkpoint checkpoints/pick_place] [--hold] [--jobs 2] [--baseline-tree DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

NOT_COMPARED = ("wall_s",)  # every other figure of a report row must be equal across variants

# name -> sim_node parameters of the variant
VARIANTS = {
    "per tick (before)": {"lockstep_batch": "false"},
    "batches (default)": {},
}
HOLD = ("hold at the frame, per tick", {"lockstep_batch": "false", "lockstep_chunk_latency_s": "0.0"})


# A process of the graph, named by what its command line runs.
PROCESS_TAGS = {"nodes.sim_node": "simulator", "nodes.inference_node": "inference", "nodes.chunk_executor": "executor"}
EPISODE_LINE = re.compile(r"^\s*episode\s+\d+ seed")  # the evaluator's line after each episode
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _process_cpu_s(root_pid: int) -> dict[str, float]:
    """CPU seconds (user + system) of ``root_pid`` ("evaluator") and of its descendants named in
    :data:`PROCESS_TAGS`, summed by name."""
    stats = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        stats[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / CLK_TCK, cmdline)
    out: dict[str, float] = {}
    for pid, (_, cpu_s, cmdline) in stats.items():
        ancestor, name = pid, None
        if pid == root_pid:
            name = "evaluator"
        else:
            name = next((n for tag, n in PROCESS_TAGS.items() if tag in cmdline), None)
            while name is not None and ancestor not in (root_pid, 0, 1):
                ancestor = stats[ancestor][0] if ancestor in stats else 0
            if ancestor != root_pid:
                name = None
        if name is not None:
            out[name] = out.get(name, 0.0) + cpu_s
    return out


def _figures(report: dict) -> list[dict]:
    return [{k: v for k, v in e.items() if k not in NOT_COMPARED} for e in report["episodes"]]


def _run(out: Path, args, sim_params: dict, jobs: int = 1, tree: str | None = None) -> dict:
    """One ``para-sim eval --lockstep``; its report, with ``command_wall_s`` and ``cpu_s`` (CPU seconds of each
    process from the end of the first episode to the end of the last, ``{}`` with fewer than two episodes).
    ``tree``: run the package at that directory instead of this one."""
    cmd = [sys.executable, "-m", "para_ros.commands.sim", "eval", "--lockstep", "--checkpoint",
           str(Path(args.checkpoint).resolve()), "--episodes", str(args.episodes), "--seed", str(args.seed),
           "--no-videos", "--out", str(out.resolve()),
           "--node-param", f"chunk_executor:lockstep_latency_s:={args.latency_s}", "--jobs", str(jobs)]  # fmt: skip
    for name, value in sim_params.items():
        cmd += ["--node-param", f"sim_node:{name}:={value}"]
    env, cwd = dict(os.environ), None
    if tree is not None:  # python -m puts the working directory first on the path: run there too
        cwd = str(Path(tree).resolve())
        env["PYTHONPATH"] = os.pathsep.join([cwd, *env.get("PYTHONPATH", "").split(os.pathsep)])
    marks: list[dict[str, float]] = []  # CPU at the end of each episode
    t0 = time.monotonic()
    with open(out.with_suffix(".log"), "w") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd)
        latest: dict[str, float] = {}

        def sample() -> None:  # every process's CPU, kept while it lives (a process gone keeps its last figure)
            while proc.poll() is None:
                latest.update(_process_cpu_s(proc.pid))
                time.sleep(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        for line in proc.stdout:
            log.write(line)
            if EPISODE_LINE.match(line):
                marks.append(_process_cpu_s(proc.pid))
        proc.wait()
        sampler.join()
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    report = json.loads((out / "report.json").read_text())
    report["command_wall_s"] = time.monotonic() - t0
    report["cpu_s"] = {k: marks[-1][k] - marks[0].get(k, 0.0) for k in marks[-1]} if len(marks) >= 2 else {}
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
    p.add_argument(
        "--baseline-tree",
        default=None,
        help="also the default variant with the package at this directory (e.g. the code before a change)",
    )
    args = p.parse_args(argv)
    if args.baseline_tree is not None and not (Path(args.baseline_tree) / "para_ros" / "__init__.py").is_file():
        p.error(f"--baseline-tree {args.baseline_tree}: no para_ros package there")
    args.out.mkdir(parents=True, exist_ok=True)
    variants = {name: (params, None) for name, params in VARIANTS.items()}
    if args.hold:
        variants = {HOLD[0]: (HOLD[1], None), **variants}
    if args.baseline_tree is not None:
        variants[f"batches, code at {args.baseline_tree}"] = ({}, args.baseline_tree)
    rates: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    loads: list[float] = []
    rows: dict[str, list] = {}
    for k in range(args.repeats):
        for i, (name, (sim_params, tree)) in enumerate(variants.items()):
            report = _run(args.out / f"{k}_{i}", args, sim_params, tree=tree)
            eps = report["episodes"]
            rates[name].append(sum(e["wall_s"] for e in eps) / sum(e["duration_s"] for e in eps))
            sim_s = sum(e["duration_s"] for e in eps[1:])
            if report["cpu_s"] and sim_s > 0:
                cpu[name].append({proc: s / sim_s for proc, s in report["cpu_s"].items()})
                print(f"repeat {k} {name}: CPU-s per simulated s {_cpu_text(cpu[name][-1])}", flush=True)
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
        if cpu[n]:
            procs = sorted({proc for c in cpu[n] for proc in c})
            per_proc = {proc: statistics.median(c.get(proc, 0.0) for c in cpu[n]) for proc in procs}
            print(f"  {'':28s} median CPU-s per simulated s: {_cpu_text(per_proc)}")
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


def _cpu_text(per_process: dict[str, float]) -> str:
    order = ["simulator", "inference", "executor", "evaluator"]
    names = sorted(per_process, key=lambda n: order.index(n) if n in order else len(order))
    parts = [f"{n} {per_process[n]:.2f}" for n in names]
    return ", ".join(parts) + f"; total {sum(per_process.values()):.2f}"


if __name__ == "__main__":
    raise SystemExit(main())
