"""PARA against the coordinate-regression baseline, one camera and two, as ONE table (``scripts/generalise report``;
the command's options: ``para_ros.commands.generalisation_report``).

Reads the lockstep evaluations ``scripts/generalise`` writes under its runs folder (``runs/generalise``) and joins
them into one row per condition, one column per policy, with each cell ``successes/episodes = rate % (Wilson 95 %
interval)`` and, per camera set, the paired exact McNemar test of PARA against regression over the layout seeds both
ran (every evaluation starts at seed 100000, so two cells of one row share their seeds). The conditions:

- the viewpoint sweep (``oneview-sweep``): the nominal camera, orbits of -40, -25, +25, +40 deg and heights of
  -15, -10, +10, +15 cm (``oneview_sweep/<policy>/<point>/``);
- spatial extrapolation at the full budget (``extrapolation``): trained with the cube at y < 0, evaluated at y >= 0
  and, the budget check, at y < 0 (``extrapolation/<policy>_y_lt_0_full/eval_y_*``);
- few-shot from the camera orbited 40 deg (``fewshot``): zero-shot, 5 and 20 demonstrations, there and back at the
  nominal camera (``fewshot/<label>/<point>/``).

A cell whose report does not exist reads "not run"; episodes that ended as a lockstep fault (the graph, not the
policy) are left out of the counts. ROS-free: it only reads files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from para_ros.deploy.paired_stats import paired_outcomes
from para_ros.deploy.report_agreement import load_eval_report
from para_ros.deploy.sweep import plot_sweep, point_label
from para_ros.sim.pick_place import wilson_interval

# column key -> (title, checkpoint name under scripts/generalise's checkpoints/)
POLICIES = {
    "para_scene": ("PARA, scene camera", "pick_place_scene"),
    "regression_scene": ("regression, scene camera", "pick_place_regression_scene"),
    "para_both": ("PARA, both cameras", "pick_place"),
    "regression_both": ("regression, both cameras", "pick_place_regression"),
}
# the paired comparisons of a row: camera set -> (PARA's column, regression's column)
PAIRS = {"scene": ("para_scene", "regression_scene"), "both": ("para_both", "regression_both")}
SWEEP_ORBITS_DEG = (-40.0, -25.0, 25.0, 40.0)
SWEEP_HEIGHTS_M = (-0.15, -0.10, 0.10, 0.15)
FEWSHOT_ORBIT_DEG = 40.0
# few-shot labels of scripts/generalise fewshot's sweep: (column, demonstrations) -> checkpoint label
FEWSHOT_LABELS = {
    ("para_scene", 0): "pick_place_scene",
    ("regression_scene", 0): "pick_place_regression_scene",
    ("para_both", 0): "fixed",
    ("para_scene", 5): "pick_place_scene_fewshot5",
    ("regression_scene", 5): "pick_place_regression_scene_fewshot5",
    ("para_both", 5): "fewshot5",
    ("para_scene", 20): "pick_place_scene_fewshot20",
    ("regression_scene", 20): "pick_place_regression_scene_fewshot20",
    ("para_both", 20): "fewshot20",
}


@dataclass(frozen=True)
class Condition:
    """One row: its section, what was evaluated, and the report folder of each column (relative to the runs
    folder; a column without one was not part of the experiment)."""

    section: str
    condition: str
    reports: dict


def conditions() -> list[Condition]:
    """Every row of the table, in order, with where each cell's report is."""

    def sweep(condition: str, orbit: float, height: float) -> Condition:
        point = point_label(orbit, height)
        return Condition(
            "viewpoint",
            condition,
            {key: f"oneview_sweep/{name}/{point}" for key, (_, name) in POLICIES.items()},
        )

    rows = [sweep("nominal camera", 0.0, 0.0)]
    rows += [sweep(f"camera orbited {o:+g} deg", o, 0.0) for o in SWEEP_ORBITS_DEG]
    rows += [sweep(f"camera {100 * h:+g} cm in height", 0.0, h) for h in SWEEP_HEIGHTS_M]
    for region, text in (("y_ge_0", "extrapolation: trained at y < 0, cube at y >= 0"),
                         ("y_lt_0", "budget check: trained at y < 0, cube at y < 0")):  # fmt: skip
        rows.append(
            Condition(
                "extrapolation",
                text,
                {key: f"extrapolation/{name}_y_lt_0_full/eval_{region}" for key, (_, name) in POLICIES.items()},
            )
        )
    for n in (0, 5, 20):
        for orbit, where in (
            (FEWSHOT_ORBIT_DEG, f"at orbit {FEWSHOT_ORBIT_DEG:+g} deg"),
            (0.0, "at the nominal camera"),
        ):
            if n == 0 and orbit == 0.0:
                continue  # the zero-shot policies at the nominal camera are the sweep's first row
            what = "zero-shot" if n == 0 else f"{n} demos from orbit {FEWSHOT_ORBIT_DEG:+g} deg"
            rows.append(
                Condition(
                    "few-shot",
                    f"{what}, {where}",
                    {
                        key: f"fewshot/{label}/{point_label(orbit, 0.0)}"
                        for (key, demos), label in FEWSHOT_LABELS.items()
                        if demos == n
                    },
                )
            )
    return rows


def load_cell(runs: Path, relative: str) -> dict | None:
    """The counts of one evaluation report under ``runs`` (None when it does not exist): successes, episodes, rate,
    Wilson interval, lockstep faults left out, and its rows (seed, outcome) for the paired test. ValueError naming the
    file when it exists but is not an evaluation report."""
    path = runs / relative / "report.json"
    if not path.is_file():
        return None
    _, rows = load_eval_report(path)
    kept = [r for r in rows if r.outcome != "fault"]
    ok = sum(r.outcome == "success" for r in kept)
    n = len(kept)
    lo, hi = wilson_interval(ok, n)
    return {
        "report": str(path),
        "successes": ok,
        "episodes": n,
        "success_rate": ok / n if n else 0.0,
        "wilson95": [lo, hi],
        "faults_left_out": len(rows) - n,
        "rows": kept,
    }


def build_table(runs: str | Path) -> dict:
    """The table as a dict (also what ``table.json`` holds): per row its cells (None: not run) and, per camera set,
    the paired PARA-vs-regression comparison (None unless both cells exist and share a seed)."""
    runs = Path(runs)
    if not runs.is_dir():
        raise ValueError(f"{runs}: no such runs folder (scripts/generalise writes runs/generalise)")
    out_rows = []
    for cond in conditions():
        cells = {key: (load_cell(runs, rel) if rel else None) for key, rel in cond.reports.items()}
        paired = {}
        for cameras, (a, b) in PAIRS.items():
            ca, cb = cells.get(a), cells.get(b)
            result = paired_outcomes(ca["rows"], cb["rows"]) if ca and cb else None
            paired[cameras] = result if result and result["seeds"] else None
        out_rows.append(
            {
                "section": cond.section,
                "condition": cond.condition,
                "cells": {key: cells.get(key) for key in POLICIES},
                "paired": paired,
            }
        )
    return {"runs": str(runs), "columns": {key: title for key, (title, _) in POLICIES.items()}, "rows": out_rows}


def cell_text(cell: dict | None) -> str:
    """``k/n = r % (lo-hi %)``, or "not run"."""
    if not cell or not cell["episodes"]:
        return "not run"
    lo, hi = cell["wilson95"]
    return (
        f"{cell['successes']}/{cell['episodes']} = {100 * cell['success_rate']:.0f} % ({100 * lo:.0f}-{100 * hi:.0f} %)"
    )


def paired_text(paired: dict | None) -> str:
    """``p = 0.031 (PARA only 5, regression only 0, 30 seeds)``, or "-" when the pair was not run on shared seeds."""
    if not paired:
        return "-"
    return (
        f"p = {paired['mcnemar_p']:.2g} (PARA only {paired['a_only']}, regression only {paired['b_only']}, "
        f"{paired['seeds']} seeds)"
    )


def format_table(table: dict) -> str:
    """The markdown table: one row per condition; the four policies with, after each camera set, its McNemar test."""
    cols = table["columns"]
    header = [
        "section",
        "condition",
        cols["para_scene"],
        cols["regression_scene"],
        "PARA vs regression, scene camera (McNemar)",
        cols["para_both"],
        cols["regression_both"],
        "PARA vs regression, both cameras (McNemar)",
    ]
    lines = [
        "# PARA against coordinate regression, one camera and two",
        "",
        "- lockstep evaluations on held-out layouts from seed 100000; each cell: successes/episodes = rate % "
        "(95 % Wilson interval); 'not run': no report",
        "- McNemar: the exact paired test over the seeds both policies ran (two-sided p)",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for row in table["rows"]:
        c, p = row["cells"], row["paired"]
        lines.append(
            "| "
            + " | ".join(
                [
                    row["section"],
                    row["condition"],
                    cell_text(c["para_scene"]),
                    cell_text(c["regression_scene"]),
                    paired_text(p["scene"]),
                    cell_text(c["para_both"]),
                    cell_text(c["regression_both"]),
                    paired_text(p["both"]),
                ]
            )
            + " |"
        )
    return "\n".join(lines) + "\n"


def sweep_plot_data(table: dict) -> dict:
    """The viewpoint rows in ``para_ros.deploy.sweep.plot_sweep``'s input form (one line per policy)."""
    cond_by_name = {c.condition: c for c in conditions()}
    points = []
    for row in table["rows"]:
        if row["section"] != "viewpoint":
            continue
        rel = cond_by_name[row["condition"]].reports["para_scene"]
        point = rel.rsplit("/", 1)[-1]
        orbit = next((o for o in SWEEP_ORBITS_DEG if point == point_label(o, 0.0)), None)
        height = next((h for h in SWEEP_HEIGHTS_M if point == point_label(0.0, h)), None)
        axis, value = ("orbit", orbit) if orbit is not None else ("height", height) if height is not None else (
            "nominal", 0.0)  # fmt: skip
        results = {}
        for key, title in table["columns"].items():
            cell = row["cells"][key]
            results[title] = (
                {k: cell[k] for k in ("successes", "episodes", "success_rate", "wilson95")} if cell else None
            )
        points.append({"point": point, "axis": axis, "value": value, "results": results})
    return {
        "settings": {"episodes": "as in each cell"},
        "checkpoints": list(table["columns"].values()),
        "nominal_camera": {"fovy_deg": 0.0},
        "points": points,
    }


def write_report(runs: str | Path, out: str | Path) -> tuple[dict, list[Path]]:
    """``table.md``, ``table.json`` and (when any viewpoint cell was run) ``sweep.png`` in ``out``; returns the table
    and the files written."""
    table = build_table(runs)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "table.md", out / "table.json"]
    (out / "table.md").write_text(format_table(table))
    serialisable = {
        **table,
        "rows": [
            {
                **row,
                "cells": {
                    k: ({kk: vv for kk, vv in c.items() if kk != "rows"} if c else None)
                    for k, c in row["cells"].items()
                },  # fmt: skip
            }
            for row in table["rows"]
        ],
    }
    (out / "table.json").write_text(json.dumps(serialisable, indent=2))
    data = sweep_plot_data(table)
    if any(r for p in data["points"] for r in p["results"].values()):
        plot_sweep(data, out / "sweep.png")
        written.append(out / "sweep.png")
    return table, written
