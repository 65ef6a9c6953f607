"""scripts/setup: idempotent, names missing tools, never marks a failed set-up as done; colcon builds the packages."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SETUP = REPO / "scripts" / "setup"
VENV = Path(sys.prefix)


def run(cmd, env=None, cwd=REPO, timeout=600):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_second_setup_run_does_nothing():
    first = run([str(SETUP)])
    assert first.returncode == 0, first.stderr
    stamp_before = (VENV / ".para-setup-stamp").read_text()
    second = run([str(SETUP)])
    assert second.returncode == 0, second.stderr
    assert "up to date" in second.stdout
    assert "installing" not in second.stdout and "building" not in second.stdout
    assert (VENV / ".para-setup-stamp").read_text() == stamp_before


def _path_without(tmp_path: Path, missing: str) -> str:
    """A PATH holding the usual tools except ``missing``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in (
        "bash",
        "dirname",
        "sed",
        "cat",
        "cut",
        "sha256sum",
        "find",
        "sort",
        "python3",
        "g++",
        "gcc",
        "cmake",
        "make",
        "rm",
        "mkdir",
        "tail",
        "nproc",
    ):
        found = shutil.which(tool)
        if tool != missing and found:
            (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


@pytest.mark.parametrize("missing, hint", [("cmake", "apt-get install cmake"), ("g++", "apt-get install g++")])
def test_missing_build_tool_stops_setup_before_touching_anything(tmp_path, missing, hint):
    venv = tmp_path / "venv"
    env = {**os.environ, "PATH": _path_without(tmp_path, missing), "PARA_VENV": str(venv), "PYTHON": "python3"}
    env.pop("CMAKE", None)
    env.pop("CXX", None)
    result = run([shutil.which("bash"), str(SETUP)], env=env)
    assert result.returncode == 1
    assert missing in result.stderr and hint in result.stderr
    assert not venv.exists(), "setup created a venv although a build tool is missing"


@pytest.mark.slow
def test_failed_install_leaves_no_stamp(tmp_path):
    """pip cannot reach any index: setup fails naming pip, and the venv is not marked as set up."""
    venv = tmp_path / "venv"
    env = {**os.environ, "PARA_VENV": str(venv), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path)}
    result = run([str(SETUP)], env=env)
    assert result.returncode == 1
    assert "pip could not install" in result.stderr
    assert not (venv / ".para-setup-stamp").exists()
    again = run([str(SETUP)], env=env)  # the next run does not take the broken venv for a finished one
    assert again.returncode == 1 and "up to date" not in again.stdout


@pytest.mark.slow
def test_colcon_builds_both_packages_in_a_ros_workspace(tmp_path):
    """The README's `colcon build --paths ...` in a workspace, with colcon and the ROS wheels from PyPI."""
    src = tmp_path / "ws" / "src" / "para_ros"
    files = run(["git", "ls-files", "-z"]).stdout.split("\0")
    for rel in filter(None, files):
        dst = src / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if (REPO / rel).is_symlink():
            dst.symlink_to(os.readlink(REPO / rel))
        elif (REPO / rel).is_file():
            shutil.copy2(REPO / rel, dst)
    ws = tmp_path / "ws"
    env = {
        **os.environ,
        "PATH": f"{VENV / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "PARA_PYPI_ROS": "1",
        "AMENT_PREFIX_PATH": str(VENV),
        "CMAKE_PREFIX_PATH": str(VENV),
    }
    result = run(
        [
            str(VENV / "bin" / "colcon"),
            "build",
            "--paths",
            "src/para_ros",
            "src/para_ros/interfaces/para_msgs",
            "--cmake-args",
            f"-DPython3_EXECUTABLE={VENV / 'bin' / 'python'}",
            "-DBUILD_TESTING=OFF",
        ],
        env=env,
        cwd=ws,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "2 packages finished" in result.stdout
    install = ws / "install"
    generated = list((install / "para_msgs").rglob("para_msgs/msg/_action_chunk.py"))
    assert generated, "colcon did not generate the Python ActionChunk"
    assert (install / "para_ros" / "share" / "para_ros" / "package.xml").is_file()
    # `ros2 run para_ros X` and launch_ros look for executables in lib/<package> (setup.cfg puts them there)
    for exe in ("inference_node", "chunk_executor", "sim_node", "para-deploy"):
        assert (install / "para_ros" / "lib" / "para_ros" / exe).is_file(), f"{exe} not in lib/para_ros"
    assert (install / "para_ros" / "share" / "para_ros" / "launch" / "deploy.launch.py").is_file()
    # The colcon-built message imports and is the one from the workspace, not the venv's.
    site = generated[0].parent.parent.parent
    check = run(
        [sys.executable, "-c", "import para_msgs.msg as m; m.ActionChunk(model_id='x'); print(m.__file__)"],
        env={**os.environ, "PYTHONPATH": str(site)},
    )
    assert check.returncode == 0, check.stderr
    assert str(site) in check.stdout
