"""A/B evaluation in one command (``para-sim eval --compare NODE:PARAM=V1,V2[,...]``).

One evaluation graph per value of one node parameter, each in its own DDS domain, all started at once; the episodes are
interleaved: seed ``s`` with V1, then with V2, ..., then seed ``s + 1`` (:func:`interleaved_order`), so a drift of the
machine during the run (another job, thermal throttling) falls on every variant alike, and an interrupted run holds
complete seeds. In lockstep mode (``--lockstep``, recommended) the graphs that wait for their turn hold their
simulators and cost nothing; in real time they keep running.

The report (``report.json``, ``report.md``) holds each variant's success rate with its 95 % Wilson interval and, for
every pair of variants, the paired table of per-seed outcomes and the exact McNemar test (:func:`para_ros.deploy.paired_stats.mcnemar_exact`): the
seeds where both succeed or both fail say nothing about which is better; among the discordant seeds (one succeeds, the
other fails), under "no difference" each is equally likely to go either way, so their split is Binomial(n, 1/2). The
two-sided p-value is how likely a split at least as uneven would be by chance.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, replace
from datetime import datetime
from pathlib import Path

import yaml

from para_ros.dds_env import fresh_domain_id
from para_ros.deploy import closed_loop as cl
from para_ros.deploy.episodes import TaskClient, cut_short, run_episode, summarise, wait_for_first_chunk
from para_ros.deploy.graph_run import GraphRun, SignalStop, run_exit_status
from para_ros.deploy.paired_stats import paired_outcomes
from para_ros.nodes.parameter_registry import check_node_params


def parse_compare(text: str) -> tuple[str, str, list]:
    """``NODE:PARAM=V1,V2[,...]`` -> (node, parameter, values), each value read as YAML and checked against the
    node's parameter table. ValueError naming the problem otherwise."""
    head, sep, tail = text.partition("=")
    node, _, name = head.partition(":")
    raw = [v.strip() for v in tail.split(",")]
    if not (sep and node.strip() and name.strip()) or any(not v for v in raw):
        raise ValueError(
            f"--compare {text!r}: write NODE:PARAM=V1,V2[,...], e.g. inference_node:decoding=argmax,joint,fused"
        )
    node, name = node.strip(), name.strip()
    if len(raw) < 2:
        raise ValueError(f"--compare {text!r}: give at least two values to compare")
    if len(set(raw)) != len(raw):
        raise ValueError(f"--compare {text!r}: the values repeat; give distinct values")
    values = [check_node_params({node: {name: yaml.safe_load(v)}})[node][name] for v in raw]
    return node, name, values


def interleaved_order(seeds: list[int], n_variants: int) -> list[tuple[int, int]]:
    """(seed, variant index) in run order: every variant on a seed before the next seed."""
    return [(s, v) for s in seeds for v in range(n_variants)]


def variant_label(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def write_compare_report(out: Path, settings, node: str, name: str, labels: list[str], rows: dict, extra: dict) -> dict:
    summaries = {lab: summarise(rows[lab]) for lab in labels}
    pairs = []
    for i in range(len(labels)):
        for j in range(i + 1, len(labels)):
            pairs.append({"a": labels[i], "b": labels[j], **paired_outcomes(rows[labels[i]], rows[labels[j]])})
    report = {
        "settings": asdict(settings),
        "node": node,
        "parameter": name,
        "variants": labels,
        "summaries": summaries,
        "pairs": pairs,
        "episodes": {lab: [asdict(r) for r in rows[lab]] for lab in labels},
        **extra,
    }
    (out / "report.json").write_text(json.dumps(report, indent=2))
    clock = "lockstep (simulated time)" if settings.lockstep else "real time (wall clock)"
    lines = [
        f"# para-sim eval --compare {node}:{name}: {Path(settings.checkpoint).name}",
        "",
        f"- seeds {settings.seed}..{settings.seed + settings.episodes - 1}, interleaved (each seed with every "
        f"value in turn); clock: {clock}",
        "- other node parameters beyond config/*.yaml: "
        + (
            "; ".join(f"{nd} {k}={v!r}" for nd, values in settings.node_params.items() for k, v in values.items())
            or "none"
        ),
        "",
        f"| {name} | episodes | successes | success rate | 95 % Wilson interval | "
        + " | ".join(o for o in summaries[labels[0]]["outcomes"] if o != "success")
        + " |",
        "|---|---|---|---|---|" + "---|" * (len(summaries[labels[0]]["outcomes"]) - 1),
    ]
    for lab in labels:
        s = summaries[lab]
        lo, hi = s["wilson95"]
        lines.append(
            f"| {lab} | {s['episodes']} | {s['successes']} | {100 * s['success_rate']:.1f} % | "
            f"{100 * lo:.1f}..{100 * hi:.1f} % | "
            + " | ".join(str(n) for o, n in s["outcomes"].items() if o != "success")
            + " |"
        )
    lines += [
        "",
        "Paired comparison on the same seeds (exact McNemar test on the discordant seeds):",
        "",
        "| A | B | seeds | both succeed | A only | B only | neither | A - B | p (two-sided) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in pairs:
        lines.append(
            f"| {p['a']} | {p['b']} | {p['seeds']} | {p['both']} | {p['a_only']} | {p['b_only']} | "
            f"{p['neither']} | {100 * p['difference']:+.1f} pts | {p['mcnemar_p']:.3g} |"
        )
    lines += [
        "",
        "A p-value under 0.05 says the difference is unlikely to be chance on these seeds; a larger one "
        "says these seeds cannot tell the variants apart.",
        "",
        "| seed | " + " | ".join(labels) + " |",
        "|---|" + "---|" * len(labels),
    ]
    by_seed: dict[int, dict[str, str]] = {}
    for lab in labels:
        for r in rows[lab]:
            by_seed.setdefault(r.seed, {})[lab] = r.outcome
    for seed in sorted(by_seed):
        lines.append(f"| {seed} | " + " | ".join(by_seed[seed].get(lab, "") for lab in labels) + " |")
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return {"summaries": summaries, "pairs": pairs}


def run_compare(settings) -> int:
    """Run the A/B evaluation of ``settings.compare`` (see the module docstring); 0, or 1 after an error, 2 for bad
    input."""
    try:
        node, name, values = parse_compare(settings.compare)
        if name in settings.node_params.get(node, {}):
            raise ValueError(f"--compare sets {node} {name}; drop it from --node-param")
        cl.check_checkpoint_matches_sim(settings.checkpoint)
    except ValueError as exc:
        print(f"para-sim eval: {exc}", file=sys.stderr)
        return 2
    labels = [variant_label(v) for v in values]
    out = Path(settings.out or Path("runs") / datetime.now().strftime("compare-%Y%m%d-%H%M%S"))
    out.mkdir(parents=True, exist_ok=True)
    if not settings.lockstep:
        print(
            "para-sim eval: --compare without --lockstep: the graphs waiting for their turn keep running and load "
            "the machine; results then depend on it",
            file=sys.stderr,
        )
    T_cam, sim_over = cl.sim_overrides(settings)
    ds = cl.deploy_settings(settings)
    signals = SignalStop()
    stop = signals.event
    groups: dict[str, GraphRun] = {}
    evs, variant_settings = {}, {}
    rows: dict[str, list] = {lab: [] for lab in labels}
    extra: dict = {"interrupted": False}
    domains: set[int] = set()
    try:
        for lab, value in zip(labels, values):
            domain = fresh_domain_id()
            while domain in domains:
                domain = fresh_domain_id()
            domains.add(domain)
            params = {**settings.node_params, node: {**settings.node_params.get(node, {}), name: value}}
            variant_settings[lab] = replace(settings, node_params=params, compare="")
            groups[lab] = GraphRun(out / "logs" / lab, echo=settings.echo, domain_id=domain)
            cl.start_graph(groups[lab], ds, sim_over, params)
            evs[lab] = TaskClient(T_cam, domain_id=domain)
            print(f"para-sim eval: variant {node} {name}={lab}: ROS_DOMAIN_ID {domain}", flush=True)
        for lab in labels:
            wait_for_first_chunk(evs[lab], groups[lab], stop, timeout_s=300.0, lockstep=settings.lockstep)
        print(
            f"para-sim eval: {settings.episodes} seeds from {settings.seed} x {len(labels)} variants, "
            f"interleaved; report in {out}",
            flush=True,
        )
        seeds = [settings.seed + k for k in range(settings.episodes)]
        for seed, v in interleaved_order(seeds, len(labels)):
            if stop.is_set():
                extra["interrupted"] = True
                break
            lab = labels[v]
            dead = groups[lab].first_dead()
            if dead is not None:
                raise RuntimeError(
                    f"{lab}: {dead.spec.name} exited with status {dead.returncode}:\n{groups[lab].log_tail(dead)}"
                )
            row = run_episode(evs[lab], variant_settings[lab], seed - settings.seed, seed, stop, False)
            if cut_short(row, stop):
                extra["interrupted"] = True
                break
            rows[lab].append(row)
            write_compare_report(out, settings, node, name, labels, rows, extra)
            print(
                f"  seed {seed} {name}={lab}: {row.outcome:9s} {row.duration_s:5.1f} s"
                + (f"  [wall {row.wall_s:.1f} s]" if math.isfinite(row.wall_s) else "")
                + (f"  {row.fault}" if row.fault else ""),
                flush=True,
            )
    except RuntimeError as exc:
        print(f"para-sim eval: {exc}", file=sys.stderr)
        extra["error"] = str(exc)
    finally:
        extra["interrupted"] = extra["interrupted"] or stop.is_set()  # also a signal during the last seed
        for ev in evs.values():
            ev.close()
        for group in groups.values():
            group.stop(timeout_s=5.0)
        signals.restore()
    result = write_compare_report(out, settings, node, name, labels, rows, extra)
    for lab in labels:
        s = result["summaries"][lab]
        lo, hi = s["wilson95"]
        print(
            f"para-sim eval: {name}={lab}: {s['successes']}/{s['episodes']} successes "
            f"({100 * s['success_rate']:.1f} %, 95 % Wilson interval {100 * lo:.1f}..{100 * hi:.1f} %)"
        )
    for p in result["pairs"]:
        print(
            f"para-sim eval: {p['a']} vs {p['b']}: {p['a_only']} seeds only {p['a']} succeeded, {p['b_only']} "
            f"only {p['b']}; exact McNemar p = {p['mcnemar_p']:.3g}"
        )
    print(f"para-sim eval: report {out / 'report.md'}")
    return run_exit_status(extra)
