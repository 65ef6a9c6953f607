"""The registry of the nodes' parameter tables: which node has which table and shipped ``config/<node>.yaml``,
the check of ``--node-param`` values against them, and the command that checks or rewrites the shipped files::

    python -m para_ros.nodes.parameter_registry          # exit 1 when config/*.yaml differ from the tables
    python -m para_ros.nodes.parameter_registry --write  # regenerate them

It lives apart from ``parameters`` (the table type every node imports) so that no node imports a module that imports
every node.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping

from para_ros import paths
from para_ros.nodes.parameters import ParameterTable


def tables() -> dict[str, tuple[ParameterTable, str]]:
    """Every node's table and its shipped file name (the executor's with the command backends registered now:
    :mod:`para_ros.nodes.command_backends`)."""
    # the nodes import rclpy, OpenCV and torch: loaded when a table is asked for, not by importing this registry
    from para_ros.nodes.calibration_monitor import PARAMETERS as calibration_monitor
    from para_ros.nodes.calibration_tf import PARAMETERS as calibration_tf
    from para_ros.nodes.executor_parameters import parameter_table as executor_table
    from para_ros.nodes.inference_params import PARAMETERS as inference
    from para_ros.nodes.sim_node import PARAMETERS as sim

    return {
        "chunk_executor": (executor_table(), "executor.yaml"),  # with every command backend registered now
        "inference_node": (inference, "inference.yaml"),
        "sim_node": (sim, "sim.yaml"),
        "calibration_tf": (calibration_tf, "calibration_tf.yaml"),
        "calibration_monitor": (calibration_monitor, "calibration_monitor.yaml"),
    }


def check_node_params(node_params: Mapping[str, Mapping[str, object]]) -> dict[str, dict[str, object]]:
    """``node_params`` ({node: {name: value}}, e.g. from ``--node-param``) with each value coerced by its node's table.

    :raises ValueError: an unknown node or parameter, or a value its table refuses (range, choices, type), named.
    """
    if not node_params:
        return {}
    known = tables()
    out: dict[str, dict[str, object]] = {}
    for node, values in node_params.items():
        if node not in known:
            raise ValueError(f"--node-param: no node {node!r} in the graph (nodes: {', '.join(known)})")
        table = known[node][0]
        unknown = sorted(set(values) - set(table.defaults()))
        if unknown:
            raise ValueError(
                f"--node-param: {node} has no parameter {', '.join(map(repr, unknown))} (`{node} --help` lists them)"
            )
        coerced = table.coerce_all(values)
        out[node] = {name: coerced[name] for name in values}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m para_ros.nodes.parameter_registry",
        description="Check (default) or --write config/*.yaml from the nodes' parameter tables.",
    )
    parser.add_argument("--write", action="store_true", help="rewrite the files from the tables")
    args = parser.parse_args(argv)
    stale = []
    for _name, (table, file_name) in tables().items():
        path = paths.REPO_ROOT / "config" / file_name
        text = table.yaml_text()
        if args.write:
            path.write_text(text)
            print(f"wrote {path}")
        elif not path.exists() or path.read_text() != text:
            stale.append(str(path))
    if stale:
        print("out of date with the parameter tables (run with --write): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
