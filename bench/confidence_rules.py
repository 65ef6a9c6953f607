"""Which fitting rule for the confidence supervisor: every candidate rule fitted on the same runs, and what the
supervisor's replay then does on them (ROS-free, reads ``para-sim eval`` folders).

The thresholds of a rule are fitted on the successful episodes only (``para-sim confidence-report``); the rule itself
(which measures, how many steps of a chunk, the slowing budget) is chosen here by what it catches on the failing
episodes of the same data. Judge the chosen rule on other seeds afterwards (``scripts/confidence``).

    python bench/confidence_rules.py runs/confidence/fit_data/*

prints, per rule: the fitted thresholds, the successful episodes held, the failing episodes held, those held within
``--within`` s of their condition's start (``para_ros.deploy.supervisor_table.condition_start_s``) and the share of
the successful episodes' chunks slowed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

from para_ros.deploy.confidence_report import (
    FitRule,
    fit_thresholds,
    load_confidence,
    rates,
    replay,
    supervisor_config,
)
from para_ros.deploy.supervisor_table import DEFAULT_WITHIN_S, condition_start_s

MEASURE_SETS = (
    ("peak_mass",),
    ("chunk_agreement",),
    ("view_agreement",),
    ("peak_mass", "chunk_agreement"),
    ("peak_mass", "view_agreement"),
    ("peak_mass", "chunk_agreement", "view_agreement"),
)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="para-sim eval folders (each with report.json and confidence.jsonl)")
    p.add_argument("--steps-checked", type=int, nargs="+", default=[1, 2], help="candidates (default 1 2)")
    p.add_argument("--slow-rate", type=float, nargs="+", default=[0.05, 0.1], help="candidates (default 0.05 0.1)")
    p.add_argument("--hold-rate", type=float, default=0.02, help="the hold budget of every rule (default 0.02)")
    p.add_argument("--within", type=float, default=DEFAULT_WITHIN_S, help="seconds after a condition's start")
    p.add_argument("--json", default=None, help="also write the table as JSON here")
    args = p.parse_args(argv)

    runs = {}
    for folder in args.runs:
        settings = json.loads((Path(folder) / "report.json").read_text())["settings"]
        # the replay's times run from the first chunk after the hand-over
        runs[folder] = (load_confidence([folder]), condition_start_s(settings) - float(settings.get("settle_s", 0.0)))
    episodes = [e for eps, _ in runs.values() for e in eps]
    print(f"{len(episodes)} episodes ({sum(e.success for e in episodes)} successful) from {len(runs)} runs")
    print(
        "| steps | slow rate | measures | thresholds (slow / hold) | successful held | failing held | "
        f"in {args.within:g} s | chunks slowed |"
    )
    print("|---|---|---|---|---|---|---|---|")
    table = []
    for steps, slow_rate, measures in itertools.product(args.steps_checked, args.slow_rate, MEASURE_SETS):
        rule = FitRule(hold_rate=args.hold_rate, slow_rate=slow_rate, steps_checked=steps, measures=measures)
        fitted = fit_thresholds(episodes, rule)
        config = supervisor_config(fitted, rule)
        r = rates(episodes, config)
        in_time = 0
        for eps, start_s in runs.values():
            for e in eps:
                if not e.success:
                    rep = replay(e, config)
                    in_time += rep.held and rep.first_hold_s <= start_s + args.within
        s, f = r["successful"], r["failing"]
        thresholds = ", ".join(f"{m} {t['slow']:g} / {t['hold']:g}" for m, t in fitted.items())
        row = {
            "steps_checked": steps,
            "slow_rate": slow_rate,
            "measures": list(measures),
            "thresholds": {m: [t["slow"], t["hold"]] for m, t in fitted.items()},
            "successful_held": s["held"],
            "successful": s["episodes"],
            "failing_held": f["held"],
            "failing": f["episodes"],
            "failing_held_in_time": in_time,
            "chunks_slowed": s["chunks_slowed_or_held_rate"],
        }
        table.append(row)
        print(f"| {steps} | {slow_rate:g} | {', '.join(measures)} | {thresholds} | {s['held']}/{s['episodes']} | "
              f"{f['held']}/{f['episodes']} | {in_time}/{f['episodes']} | {100 * row['chunks_slowed']:.1f} % |",
              flush=True)  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
