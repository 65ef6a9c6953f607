#!/usr/bin/env python3
"""Write (or check) docs/parameters.md, the reference of every node's ROS parameters, from the nodes' parameter tables.

The tables (``PARAMETERS`` in each node module, listed by ``para_ros.nodes.parameter_registry.tables``) are the one
source of the shipped ``config/*.yaml``, of each node's ``--help`` and of ``ros2 param describe``; this page is one more
view of them. A test (``test/test_docs.py``) fails when the page and the tables differ.

    .venv/bin/python scripts/parameters_doc.py            # check: exit 1 and say so when docs/parameters.md is stale
    .venv/bin/python scripts/parameters_doc.py --write    # rewrite docs/parameters.md
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "parameters.md"


def _cell(text: str) -> str:
    """Text safe inside one Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def render() -> str:
    """The whole page, from the tables."""
    from para_ros.nodes.parameter_registry import tables

    out = [
        "# Node parameters",
        "",
        "Generated from the nodes' parameter tables by `scripts/parameters_doc.py --write`: edit the tables "
        "(`PARAMETERS` in `para_ros/nodes/<node>.py`), not this page.",
        "",
        "Each node loads its shipped `config/<file>.yaml` first; `--ros-args -p name:=value` or `--params-file` "
        "override it. Read-only parameters are fixed at start (`ros2 param set` is refused: restart the node); "
        "the ones re-configurable at run time are checked and applied at once, and a bad value is refused "
        "with the rule it broke. An integer is accepted for a number (`-p max_rate_hz:=30`). Safety limits "
        "(joint ranges, speeds, workspace box) are not parameters: they live in [config/yam.yaml](../config/yam.yaml).",
        "",
    ]
    entries = list(tables().items())
    out += [f"- [`{node}`](#{node}) ([config/{file}](../config/{file}))" for node, (_, file) in entries]
    for node, (table, _file) in entries:
        out += ["", f"## {node}", ""]
        if table.header:
            out += [" ".join(table.header.split()), ""]
        out += ["| parameter | default | accepts | description |", "|---|---|---|---|"]
        for p in table.params:
            if p.section:
                out.append(f"| **{_cell(p.section)}** | | | |")
            default = "(unset)" if p.optional else f"`{_cell(json.dumps(p.default))}`"
            out.append(f"| `{p.name}` | {default} | {_cell(p.constraints())} | {_cell(p.description)} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/parameters_doc.py", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite docs/parameters.md (default: only check it)")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        PAGE.write_text(text)
        print(f"wrote {PAGE}")
        return 0
    if not PAGE.exists() or PAGE.read_text() != text:
        print(
            f"{PAGE} is out of date with the parameter tables: run scripts/parameters_doc.py --write", file=sys.stderr
        )
        return 1
    print(f"{PAGE} is up to date")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
