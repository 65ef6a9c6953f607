"""The confidence supervisor judged on closed-loop runs: per condition, the outcomes with it off and on (paired on the
same seeds), and, with it on, which episodes the arm held in and how soon after the condition began (ROS-free;
``para-sim supervisor-table``, whose options live in ``para_ros.commands.sim_confidence``).

A condition is a pair of ``para-sim eval`` folders of the same seeds, one with ``chunk_executor
confidence_supervisor`` false, one true. The on run's episodes carry the supervisor's first hold as ``/diagnostics``
reported it (``held_uncertain_at_s``, episode time). When a condition starts is read from the run's settings: the
simulator's ``ood_knock_at_s`` / ``ood_camera_fault_at_s`` / ``ood_occluder_at_s`` when set (the run-time
conditions), else the hand-over (``settle_s``: a condition present from the start, such as an unseen cube colour).
An episode "held in time" is one whose first hold came at most ``within_s`` after that start.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from para_ros.deploy.paired_stats import paired_outcomes
from para_ros.sim.pick_place import wilson_interval

DEFAULT_WITHIN_S = 2.0  # the acceptance figure: holding, the reason named, within 2 s of the condition starting
CONDITION_START_PARAMS = ("ood_knock_at_s", "ood_camera_fault_at_s", "ood_occluder_at_s")


def held_at_s(row: dict) -> float | None:
    """The first hold of a ``report.json`` row (episode time s), None when never held: ``null``, absent, or the NaN
    a report of an earlier version wrote."""
    value = row.get("held_uncertain_at_s")
    return None if value is None or not math.isfinite(float(value)) else float(value)


class Row:
    """One episode of a report, read back: what the table needs of it."""

    def __init__(self, d: dict):
        self.seed = int(d["seed"])
        self.outcome = str(d["outcome"])
        self.held_at_s = held_at_s(d)  # None: never held
        self.hold_reason = str(d.get("hold_reason", ""))

    @property
    def held(self) -> bool:
        return self.held_at_s is not None


def load_run(folder) -> tuple[dict, list[Row]]:
    """(settings, judged episodes) of one ``para-sim eval`` folder; ValueError when it holds no report."""
    path = Path(folder) / "report.json"
    if not path.is_file():
        raise ValueError(f"{folder}: no report.json (a para-sim eval output folder?)")
    report = json.loads(path.read_text())
    rows = [Row(e) for e in report.get("episodes") or [] if e.get("outcome") != "fault"]
    return report.get("settings") or {}, rows


def supervisor_on(settings: dict) -> bool:
    """Whether a run had the confidence supervisor on (``--node-param chunk_executor:confidence_supervisor:=true``)."""
    value = (settings.get("node_params") or {}).get("chunk_executor", {}).get("confidence_supervisor", False)
    return str(value).lower() == "true"


def condition_start_s(settings: dict) -> float:
    """Episode time (s since the task reset) at which the run's condition begins (module docstring)."""
    sim = (settings.get("node_params") or {}).get("sim_node", {})
    starts = []
    for name in CONDITION_START_PARAMS:
        if name in sim and float(sim[name]) >= 0.0:
            if name == "ood_camera_fault_at_s" and sim.get("ood_camera_fault", "none") == "none":
                continue
            starts.append(float(sim[name]))
    return min(starts) if starts else float(settings.get("settle_s", 1.5))


def judge_condition(name: str, off_dir, on_dir, within_s: float = DEFAULT_WITHIN_S) -> dict:
    """The table row of one condition (module docstring); ValueError when the two runs are not off / on."""
    off_settings, off_rows = load_run(off_dir)
    on_settings, on_rows = load_run(on_dir)
    if supervisor_on(off_settings) or not supervisor_on(on_settings):
        raise ValueError(
            f"{name}: expected {off_dir} with the supervisor off and {on_dir} with it on "
            "(chunk_executor confidence_supervisor)"
        )
    start_s = condition_start_s(on_settings)
    failing = [r for r in on_rows if r.outcome != "success"]
    succeeding = [r for r in on_rows if r.outcome == "success"]
    in_time = [r for r in failing if r.held and r.held_at_s - start_s <= within_s + 1e-9]
    delays = sorted(r.held_at_s - start_s for r in failing if r.held)
    out = {"condition": name, "condition_start_s": start_s, "within_s": within_s}
    for key, rows in (("off", off_rows), ("on", on_rows)):
        ok = sum(r.outcome == "success" for r in rows)
        out[key] = {"successes": ok, "episodes": len(rows), "wilson95": list(wilson_interval(ok, len(rows)))}
    out["paired"] = paired_outcomes(on_rows, off_rows)  # a: on, b: off
    out["failing_on"] = len(failing)
    out["failing_held"] = sum(r.held for r in failing)
    out["failing_held_in_time"] = len(in_time)
    out["held_in_time_rate"] = len(in_time) / len(failing) if failing else float("nan")
    out["hold_delay_median_s"] = delays[len(delays) // 2] if delays else float("nan")
    out["successful_held"] = sum(r.held for r in succeeding)
    out["false_hold_rate"] = out["successful_held"] / len(on_rows) if on_rows else float("nan")
    out["reasons"] = sorted({r.hold_reason.split(" at step")[0] for r in on_rows if r.held and r.hold_reason})
    return out


def _rate(k: int, n: int) -> str:
    return f"{k}/{n}" + (f" ({100 * k / n:.0f} %)" if n else "")


def format_table(rows: list[dict]) -> str:
    lines = [
        "| condition | off: successes | on: successes | paired (on only / off only, McNemar p) | failing episodes "
        f"held within {rows[0]['within_s'] if rows else DEFAULT_WITHIN_S:g} s of the start | failing episodes held "
        "at all | median hold after the start s | successful episodes held |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        p = r["paired"]
        delay = r["hold_delay_median_s"]
        lines.append(
            f"| {r['condition']} | {_rate(r['off']['successes'], r['off']['episodes'])} | "
            f"{_rate(r['on']['successes'], r['on']['episodes'])} | {p['a_only']} / {p['b_only']}, "
            f"p = {p['mcnemar_p']:.2f} | {_rate(r['failing_held_in_time'], r['failing_on'])} | "
            f"{_rate(r['failing_held'], r['failing_on'])} | "
            f"{'' if math.isnan(delay) else f'{delay:.1f}'} | {_rate(r['successful_held'], r['on']['episodes'])} |"
        )
    return "\n".join(lines) + "\n"


def write_table(rows: list[dict], out: Path) -> str:
    """``OUT.md`` (:func:`format_table`) and ``OUT.json`` (the rows) for the output stem ``out``, its folder made;
    returns the markdown."""
    out.parent.mkdir(parents=True, exist_ok=True)
    text = format_table(rows)
    out.with_suffix(".md").write_text(text)
    out.with_suffix(".json").write_text(json.dumps(rows, indent=2) + "\n")
    return text
