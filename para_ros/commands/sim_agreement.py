"""``para-sim agreement RUN_A RUN_B``'s options: the two reports compared by
:func:`para_ros.deploy.report_agreement.agreement`, printed, and written as JSON on request."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from para_ros.deploy.report_agreement import agreement, format_agreement


def add_agreement_arguments(p) -> None:
    p.add_argument(
        "run_a", metavar="RUN_A", help="a para-sim eval report folder (or its report.json); A/B reports: PATH#VARIANT"
    )
    p.add_argument("run_b", metavar="RUN_B", help="another report of the same seeds")
    p.add_argument("--json", default="", metavar="FILE", help="also write the figures as JSON")


def cmd_agreement(args) -> int:
    try:
        result = agreement(args.run_a, args.run_b)
    except ValueError as exc:
        print(f"para-sim agreement: {exc}", file=sys.stderr)
        return 2
    print(format_agreement(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0
