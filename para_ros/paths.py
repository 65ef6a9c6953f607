"""Where the package's shipped files (parameter YAML, Fast DDS profile, rviz config, launch files) live.

Installed by colcon or ``pip install .`` they sit in ``<prefix>/share/para_ros/...``; in a source checkout
(``pip install -e .``, which does not install data files) they sit next to the package in the repository.
Both are looked up, installed first, so one code path serves a robot PC and a developer checkout.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import yaml

PACKAGE_NAME = "para_ros"
REPO_ROOT = Path(__file__).resolve().parent.parent


def _share_dirs() -> list[Path]:
    dirs = []
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            dirs.append(Path(prefix) / "share" / PACKAGE_NAME)
    dirs.append(Path(sys.prefix) / "share" / PACKAGE_NAME)
    return dirs


def share_file(relative: str) -> Path:
    """Return the path of a shipped file, e.g. ``share_file("config/yam.yaml")``.

    :param relative: path relative to the package share directory (``config/...``, ``launch/...``).
    :raises FileNotFoundError: naming every place looked in.
    """
    candidates = [REPO_ROOT / relative] + [d / relative for d in _share_dirs()]
    for path in candidates:
        if path.is_file():
            return path
    looked = "\n  ".join(str(p) for p in candidates)
    raise FileNotFoundError(f"{relative!r} not found; looked in:\n  {looked}")


def config_file(name: str) -> Path:
    """Path of a file in ``config/`` (``yam.yaml``, ``inference.yaml``, ``fastdds_loopback.xml`` ...)."""
    return share_file(f"config/{name}")


def shipped_node_params(params_file: str, node: str) -> dict:
    """The ROS parameters of ``node`` as its shipped ``params_file`` (``config/sim.yaml``) sets them."""
    return dict(yaml.safe_load(share_file(params_file).read_text())[node]["ros__parameters"])


def effective_params(params_file: str, node: str, overrides: dict) -> dict:
    """A node's parameters as it will run: its shipped file, then the run's overrides."""
    return {**shipped_node_params(params_file, node), **overrides}
