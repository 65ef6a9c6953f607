"""scripts/confidence: every evaluation it would run parses with para-sim's own parser, in lockstep, with the
supervisor off or on as its step says and the inference node's decoding the one asked (argmax by default, the
decoding of the documented figures); a missing or unknown value is refused before anything runs."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from para_ros.commands import sim as sim_cli
from para_ros.deploy.graph import parse_node_params

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "confidence"


def dry_run(*argv: str) -> list[list[str]]:
    res = subprocess.run(["bash", str(SCRIPT), *argv, "--dry-run"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return [shlex.split(line[2:]) for line in res.stdout.splitlines() if line.startswith("+ ")]


@pytest.mark.parametrize("step, decoding", [("off", None), ("on", "fused"), ("fit", "auto")])
def test_each_evaluation_parses_and_carries_the_decoding_and_the_supervisor(step, decoding):
    options = ("--decoding", decoding) if decoding else ()
    commands = [
        w for w in dry_run(step, "--episodes", "3", *options) if w[:4] == ["python", "-m", sim_cli.__name__, "eval"]
    ]
    assert len(commands) == 6  # the nominal rig and the five conditions
    for words in commands:
        args = sim_cli.build_parser().parse_args(words[3:])
        params = parse_node_params(args.node_param)
        assert args.lockstep
        assert params["inference_node"]["decoding"] == (decoding or "argmax")
        assert params["chunk_executor"]["confidence_supervisor"] is (step == "on")


@pytest.mark.parametrize(
    "argv, why",
    [
        (["on", "--decoding"], "--decoding needs a value"),
        (["on", "--decoding", "best"], "use argmax, fused, joint or auto"),
    ],
)
def test_a_missing_or_unknown_decoding_is_refused(argv, why):
    res = subprocess.run(["bash", str(SCRIPT), *argv, "--dry-run"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and why in res.stderr and "+ " not in res.stdout
