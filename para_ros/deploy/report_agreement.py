"""Do two evaluations of the same seeds agree, episode by episode? (``para-sim agreement RUN_A RUN_B``; the
command's options: ``para_ros.commands.sim_agreement``.)

Reads two ``para-sim eval`` reports (``report.json``, or the folders holding them; ``REPORT#VARIANT`` picks one
variant of an A/B report, e.g. ``runs/ab#fused``) and gives, over the seeds both
finished: how many ended with the same outcome, the two success rates with their 95 % Wilson intervals and their
difference, the paired exact McNemar test, and the seeds that differ. It names the settings that differ between the
runs (checkpoint, node parameters, lockstep, camera ...), so that a difference of configuration is not read as noise.
ROS-free: it only reads files.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from para_ros.deploy.paired_stats import outcome_agreement
from para_ros.sim.pick_place import wilson_interval

# Settings that say where a run wrote or how many seeds it ran, not how it ran them
NOT_CONFIGURATION = ("out", "episodes", "seed", "echo", "videos", "rerun", "compare")


def load_eval_report(path: str | Path) -> tuple[dict, list]:
    """(settings, rows) of a ``para-sim eval`` report, or of one variant of an A/B report (``PATH#VARIANT``); a row
    has ``seed`` and ``outcome``. ValueError naming the file when it is missing, not JSON, not an evaluation report,
    or an A/B report without a variant that it holds."""
    text, _, variant = str(path).partition("#")
    p = Path(text)
    if p.is_dir():
        p = p / "report.json"
    if not p.is_file():
        raise ValueError(f"{p}: no such report (para-sim eval writes OUT/report.json)")
    try:
        data = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{p}: not a JSON report ({exc})") from None
    episodes = data.get("episodes") if isinstance(data, dict) else None
    settings = data.get("settings", {}) if isinstance(data, dict) else {}
    if isinstance(episodes, dict):  # an A/B report: one list per variant
        if variant not in episodes:
            raise ValueError(
                f"{p} is an A/B report: name one of its variants, e.g. {text}#{next(iter(episodes), 'VARIANT')} "
                f"(it holds {', '.join(map(str, episodes)) or 'none'})"
            )
        episodes = episodes[variant]
        settings = {**settings, "compared": f"{data.get('node')}:{data.get('parameter')}={variant}"}
    elif variant:
        raise ValueError(f"{p} is not an A/B report: it has no variant {variant!r}")
    if not isinstance(episodes, list) or not all(
        isinstance(e, dict) and "seed" in e and "outcome" in e for e in episodes
    ):
        raise ValueError(f"{p}: not a para-sim eval report (no list of episodes with seed and outcome)")
    rows = [SimpleNamespace(seed=int(e["seed"]), outcome=str(e["outcome"])) for e in episodes]
    return settings, rows


def settings_differences(a: dict, b: dict) -> list[str]:
    """'name: A vs B' for every setting of how the runs ran that differs."""
    keys = sorted((set(a) | set(b)) - set(NOT_CONFIGURATION))
    return [f"{k}: {a.get(k)!r} vs {b.get(k)!r}" for k in keys if a.get(k) != b.get(k)]


def _rate(rows, seeds: set) -> tuple[int, int, float, float]:
    n = len(seeds)
    ok = sum(r.outcome == "success" for r in rows if r.seed in seeds)
    lo, hi = wilson_interval(ok, n)
    return ok, n, lo, hi


def agreement(path_a: str | Path, path_b: str | Path) -> dict:
    """Everything ``para-sim agreement`` prints, as a dict (also what ``--json`` writes)."""
    settings_a, rows_a = load_eval_report(path_a)
    settings_b, rows_b = load_eval_report(path_b)
    result = outcome_agreement(rows_a, rows_b)
    if result["seeds"] == 0:
        raise ValueError(f"{path_a} and {path_b} share no seed: nothing to compare")
    seeds = {r.seed for r in rows_a} & {r.seed for r in rows_b}
    rates = {}
    for label, rows in (("a", rows_a), ("b", rows_b)):
        ok, n, lo, hi = _rate(rows, seeds)
        rates[label] = {"successes": ok, "episodes": n, "success_rate": ok / n, "wilson95": [lo, hi]}
    return {
        "a": str(path_a),
        "b": str(path_b),
        **result,
        "rates": rates,
        "rate_difference_points": 100.0 * (rates["a"]["success_rate"] - rates["b"]["success_rate"]),
        "settings_differ": settings_differences(settings_a, settings_b),
    }


def format_agreement(result: dict) -> str:
    """The human-readable summary (markdown)."""
    ra, rb = result["rates"]["a"], result["rates"]["b"]
    paired = result["paired"]

    def rate(r):
        lo, hi = r["wilson95"]
        return f"{r['successes']}/{r['episodes']} = {100 * r['success_rate']:.1f} % ({100 * lo:.1f}-{100 * hi:.1f} %)"

    lines = [
        f"A: {result['a']}",
        f"B: {result['b']}",
        "",
        f"- same outcome: **{result['same_outcome']}/{result['seeds']} seeds ({100 * result['agreement']:.1f} %)**",
        f"- success: A {rate(ra)}, B {rate(rb)}; difference {result['rate_difference_points']:+.1f} points",
        f"- paired: both {paired['both']}, A only {paired['a_only']}, B only {paired['b_only']}, neither "
        f"{paired['neither']}; exact McNemar p = {paired['mcnemar_p']:.3g}",
    ]
    if result["differing"]:
        lines.append(
            "- differing seeds: " + ", ".join(f"{d['seed']} ({d['a']} / {d['b']})" for d in result["differing"])
        )
    if result["settings_differ"]:
        lines.append("- the runs differ in configuration: " + "; ".join(result["settings_differ"]))
    return "\n".join(lines)
