"""The confidence supervisor's two commands and their options: ``para-sim confidence-report`` (fit its thresholds
from evaluation runs: ``para_ros.deploy.confidence_report``) and ``para-sim supervisor-table`` (judge it off vs on
per condition: ``para_ros.deploy.supervisor_table``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from para_core.model.confidence import MEASURES
from para_ros.deploy.confidence_report import CONFIDENCE_FILE, FitRule, format_report, write_report
from para_ros.deploy.supervisor_table import DEFAULT_WITHIN_S, judge_condition, write_table


# ------------------------------------------------------------------------------------------- confidence-report
def add_confidence_report_arguments(p) -> None:
    p.add_argument("runs", nargs="+", metavar="RUN", help=f"para-sim eval folders (or their {CONFIDENCE_FILE})")
    p.add_argument("--out", required=True, help="folder for confidence_report.{json,md,png} and the thresholds")
    rule = FitRule()
    p.add_argument("--hold-rate", type=float, default=rule.hold_rate, help="share of successful episodes held, at most")
    p.add_argument("--slow-rate", type=float, default=rule.slow_rate, help="share of their chunks slowed, at most")
    p.add_argument("--steps-checked", type=int, default=rule.steps_checked, help="leading steps judged (0: all)")
    p.add_argument("--hold-after", type=float, default=rule.hold_after_s, help="seconds below a hold threshold")
    p.add_argument("--resume-after", type=int, default=rule.resume_after_chunks, help="confident chunks to resume")
    p.add_argument(
        "--measures", default=",".join(rule.measures), help=f"comma-separated, of {','.join(MEASURES)} (default all)"
    )
    p.add_argument(
        "--thresholds",
        metavar="PARAMS_YAML",
        default=None,
        help="judge these thresholds instead of fitting: a chunk_executor parameters file (config/executor.yaml for "
        "the shipped ones, or a confidence_thresholds.yaml this command wrote), over the shipped values; the "
        "supervisor counts as on; the fitting options are then unused",
    )


def cmd_confidence_report(args) -> int:
    try:
        rule = FitRule(
            hold_rate=args.hold_rate,
            slow_rate=args.slow_rate,
            steps_checked=args.steps_checked,
            hold_after_s=args.hold_after,
            resume_after_chunks=args.resume_after,
            measures=tuple(m.strip() for m in args.measures.split(",") if m.strip()),
        )
        given = given_supervisor(args.thresholds) if args.thresholds else None
        report = write_report(args.runs, rule, Path(args.out), given)
    except ValueError as exc:
        print(f"para-sim confidence-report: {exc}", file=sys.stderr)
        return 2
    print(format_report(report))
    print(f"para-sim confidence-report: wrote {Path(args.out) / 'confidence_report.md'}")
    return 0


def given_supervisor(path: str):
    """The supervisor set by the ``chunk_executor`` parameters in the YAML file at ``path``, over the shipped
    ``config/executor.yaml`` (ValueError naming the file or the parameter)."""
    import yaml

    from para_ros.execution.config_from_parameters import supervisor_config
    from para_ros.paths import effective_params

    try:
        doc = yaml.safe_load(Path(path).read_text())
        ours = doc["chunk_executor"]["ros__parameters"]
    except OSError as exc:
        raise ValueError(f"--thresholds {path}: {exc.strerror}") from None
    except (yaml.YAMLError, KeyError, TypeError):
        raise ValueError(
            f"--thresholds {path}: not a chunk_executor parameters file (chunk_executor: ros__parameters:)"
        ) from None
    # The replay judges from the first chunk, as the fit does (its rates are comparable): no grace unless the file
    # sets one. The executor's own grace (confidence_grace_s) only spares the first second after the hand-over.
    params = effective_params(
        "config/executor.yaml",
        "chunk_executor",
        {"confidence_grace_s": 0.0, **ours, "confidence_supervisor": True},
    )
    try:
        return supervisor_config(params)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"--thresholds {path}: {exc}") from None


# -------------------------------------------------------------------------------------------- supervisor-table
def parse_pairs(items: list[str]) -> list[tuple[str, str, str]]:
    """``NAME=OFF_DIR NAME=ON_DIR ...`` (each name twice, off first) -> [(name, off, on)]; ValueError otherwise."""
    seen: dict[str, list[str]] = {}
    for item in items:
        name, sep, folder = item.partition("=")
        if not sep or not name or not folder:
            raise ValueError(f"{item!r}: expected NAME=FOLDER")
        seen.setdefault(name, []).append(folder)
    bad = [n for n, f in seen.items() if len(f) != 2]
    if bad:
        raise ValueError(f"each condition needs two folders, the supervisor off then on: {', '.join(bad)}")
    return [(n, f[0], f[1]) for n, f in seen.items()]


def add_supervisor_table_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("runs", nargs="+", metavar="NAME=FOLDER", help="each condition twice: its off run, then its on run")
    p.add_argument("--out", required=True, help="output stem: writes OUT.md and OUT.json")
    p.add_argument(
        "--within",
        type=float,
        default=DEFAULT_WITHIN_S,
        help=f"seconds after the condition starts within which a hold counts (default {DEFAULT_WITHIN_S:g})",
    )


def cmd_supervisor_table(args) -> int:
    try:
        pairs = parse_pairs(args.runs)
        if not args.within > 0:
            raise ValueError(f"--within {args.within}: must be > 0 s")
        rows = [judge_condition(n, off, on, args.within) for n, off, on in pairs]
    except ValueError as err:
        print(f"para-sim supervisor-table: {err}")
        return 2
    print(write_table(rows, Path(args.out)), end="")
    return 0
