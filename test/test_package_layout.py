"""The package layout's one rule (docs/contracts.md): only ``nodes/``, ``ros_io/``, ``adapters/``, ``bag/``,
``deploy/``, ``teleop/`` and ``commands/`` import rclpy or a ROS message package; ``para_core`` never imports ``para_ros``. Imports
inside functions count too (an AST walk, not a grep of the top of the file)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROS_AWARE = ("nodes", "ros_io", "adapters", "bag", "deploy", "teleop", "commands")
ROS_PACKAGES = (
    "rclpy",
    "rcl_interfaces",
    "rosidl_runtime_py",
    "builtin_interfaces",
    "launch",
    "launch_ros",
    "tf2_ros",
    "cv_bridge",
    "message_filters",
    "rosgraph_msgs",
    "para_msgs",
)


def is_ros_module(name: str) -> bool:
    top = name.split(".")[0]
    return top in ROS_PACKAGES or top.endswith("_msgs") or top.endswith("_srvs") or top.endswith("_interfaces")


def imported_modules(source: str) -> list[tuple[int, str]]:
    """(line, module) of every import statement anywhere in ``source`` (absolute imports)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def ros_free_modules() -> list[Path]:
    files = sorted((REPO / "para_core").rglob("*.py"))
    for path in sorted((REPO / "para_ros").rglob("*.py")):
        parts = path.relative_to(REPO / "para_ros").parts
        if len(parts) == 1 or parts[0] not in ROS_AWARE:
            files.append(path)
    return files


def test_the_checker_sees_imports_inside_functions():
    source = "import numpy\ndef f():\n    from sensor_msgs.msg import Image\n    import rclpy.node\n"
    assert [m for _, m in imported_modules(source) if is_ros_module(m)] == ["sensor_msgs.msg", "rclpy.node"]
    assert not is_ros_module("numpy") and not is_ros_module("rosbags.typesys") and is_ros_module("std_srvs.srv")


def test_no_ros_imports_outside_the_node_and_ros_io_packages():
    files = ros_free_modules()
    names = {str(p.relative_to(REPO)) for p in files}
    # the layout itself: these ROS-free packages exist and are checked
    for must in (
        "para_ros/observation/builder.py",
        "para_ros/execution/executor_core.py",
        "para_ros/robot/yam.py",
        "para_ros/sim/yam_scene.py",
        "para_core/model/policy.py",
        "para_ros/stamps.py",
    ):
        assert must in names, must
    offenders = [
        f"{p.relative_to(REPO)}:{line} imports {mod}"
        for p in files
        for line, mod in imported_modules(p.read_text())
        if is_ros_module(mod)
    ]
    assert not offenders, "ROS imports outside nodes/ros_io/adapters/bag/deploy/teleop/commands:\n" + "\n".join(
        offenders
    )


def test_para_core_never_imports_para_ros():
    offenders = [
        f"{p.relative_to(REPO)}:{line} imports {mod}"
        for p in sorted((REPO / "para_core").rglob("*.py"))
        for line, mod in imported_modules(p.read_text())
        if mod.split(".")[0] == "para_ros"
    ]
    assert not offenders, "\n".join(offenders)


def test_the_top_level_holds_only_the_cross_cutting_helpers():
    """New modules go into a layer folder; the top level keeps the env helper, shipped paths and stamps."""
    top = sorted(p.name for p in (REPO / "para_ros").glob("*.py"))
    assert top == ["__init__.py", "dds_env.py", "paths.py", "stamps.py"], top
    core_top = sorted(p.name for p in (REPO / "para_core").glob("*.py"))
    assert core_top == ["__init__.py"], core_top
