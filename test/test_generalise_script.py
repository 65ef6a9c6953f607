"""scripts/generalise: every command each experiment would run parses with that command's own parser."""

from __future__ import annotations

import importlib
import shlex
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "generalise"


def dry_run(experiment: str, *options: str) -> list[list[str]]:
    """The commands (words) ``scripts/generalise EXPERIMENT --dry-run`` prints, without running any."""
    res = subprocess.run(
        ["bash", str(SCRIPT), experiment, "--dry-run", *options], capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr
    return [shlex.split(line[2:]) for line in res.stdout.splitlines() if line.startswith("+ ")]


@pytest.mark.parametrize(
    "experiment, options",
    [
        ("randomised", ()),
        ("randomised", ("--from-scratch",)),
        ("sweep", ()),
        ("oneview", ()),
        ("oneview-sweep", ()),
        ("extrapolation", ()),
        ("fewshot", ()),
        ("report", ()),
    ],
)
def test_every_command_of_an_experiment_parses(experiment, options):
    commands = dry_run(experiment, *options, "--episodes", "7")
    assert commands, f"scripts/generalise {experiment} printed no command"
    modules = set()
    for words in commands:
        if words[0] == "python":
            assert words[1] == "-m"
            module, args = words[2], words[3:]
            modules.add(module)
            parser = importlib.import_module(module).build_parser()
            try:
                parsed = parser.parse_args(args)
            except SystemExit:
                raise AssertionError(f"'{' '.join(words)}' does not parse with {module}'s parser") from None
            if (
                module == "para_ros.commands.sim"
                and parsed.command in ("eval", "sweep")
                and not getattr(parsed, "report_only", False)
            ):
                assert parsed.lockstep, f"an evaluation outside lockstep: {' '.join(words)}"
                want = {"randomised": (50,), "oneview-sweep": (7, 10)}.get(experiment, (7,))  # 10: the outer points
                assert parsed.episodes in want
        else:  # scripts/train_pick_place: its options are the ones it documents
            assert words[0].endswith("scripts/train_pick_place"), words
            usage = (REPO / "scripts" / "train_pick_place").read_text()
            rest = iter(words[1:])
            for word in rest:
                if word == "--":
                    break  # the rest goes to para-train
                assert word.startswith("--") and f"{word})" in usage, f"scripts/train_pick_place has no option {word}"
                next(rest)  # every option of the script takes a value
    if experiment == "randomised" and not options:
        assert "para_core.train.cli" in modules and "para_ros.commands.ship_checkpoint" in modules


def test_unknown_experiment_and_option_are_refused():
    for argv in (["nonsense"], ["sweep", "--bogus"]):
        res = subprocess.run(["bash", str(SCRIPT), *argv], capture_output=True, text=True, timeout=60)
        assert res.returncode == 2 and "scripts/generalise: unknown" in res.stderr


def test_ship_checkpoint_records_the_fine_tune_source_and_its_iterations_without_validation(tmp_path):
    """A fine-tune without a validation split (the few-shot recipe): the recipe still says how many iterations ran
    (the last logged one) and which weights it started from."""
    import json

    from para_ros.commands import ship_checkpoint

    run = tmp_path / "run"
    (run / "checkpoint").mkdir(parents=True)
    (run / "checkpoint" / "model.safetensors").write_bytes(b"weights")
    (run / "checkpoint" / "config.json").write_text("{}")
    episodes = [str(tmp_path / "data" / f"episode_{i:06d}") for i in range(3)]
    run_json = {
        "model_config": {"name": "pick_place"},
        "train_config": {"init_from": "checkpoints/pick_place", "max_iters": 300},
        "train_episodes": episodes,
        "val_episodes": [],
    }
    (run / "run.json").write_text(json.dumps(run_json))
    lines = [{"iter": i, "split": "train", "loss": 3.0 - i / 200} for i in (25, 150, 300)]
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(m) for m in lines) + "\n")
    out = tmp_path / "shipped"
    argv = ["--run", str(run), "--out", str(out), "--episodes", "3", "--trained-at", "abc", "--data", "data/demos"]
    assert ship_checkpoint.main(argv) == 0
    recipe = json.loads((out / "recipe.json").read_text())
    assert recipe["init_from"] == "checkpoints/pick_place" and recipe["iterations"] == 300
    assert recipe["demonstrations"]["folder"] == "data/demos"  # --data is recorded
    assert recipe["final_validation"] is None and recipe["demonstrations"]["layout_seeds"] == [0, 1, 2]
    assert (out / "model.safetensors").read_bytes() == b"weights"
