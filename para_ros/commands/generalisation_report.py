"""``scripts/generalise report``: the one table of PARA against coordinate regression, one camera and two, from the
evaluations under a ``scripts/generalise`` runs folder, written as ``table.md``, ``table.json`` and ``sweep.png``
(the rows, cells and tests: :mod:`para_ros.deploy.generalisation_table`).

    python -m para_ros.commands.generalisation_report --runs runs/generalise --out docs/generalisation/oneview
"""

from __future__ import annotations

import argparse
import sys

from para_ros.deploy.generalisation_table import format_table, write_report


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="scripts/generalise report",
        description="PARA against coordinate regression, one camera and two: one table (Wilson intervals, paired "
        "McNemar) and the viewpoint plot from whatever evaluations exist; a missing one reads 'not run'.",
    )
    p.add_argument("--runs", required=True, help="scripts/generalise's runs folder (runs/generalise)")
    p.add_argument("--out", required=True, help="folder for table.md, table.json and sweep.png")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        table, written = write_report(args.runs, args.out)
    except ValueError as exc:
        print(f"scripts/generalise report: {exc}", file=sys.stderr)
        return 2
    print(format_table(table))
    print("written: " + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
