"""The confidence supervisor's shipped thresholds (config/executor.yaml) reproduce from the committed evaluation data
they were fitted on (docs/confidence/default_fit: 150 lockstep episodes of the default checkpoint), by the rule
docs/confidence.md states: steps checked 1, slowing budget 10 %, peak mass, chunk agreement and view agreement."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import yaml

from para_ros.deploy.confidence_report import FitRule, fit_thresholds, load_confidence, rates, supervisor_config

REPO = Path(__file__).resolve().parent.parent
FIT = REPO / "docs" / "confidence" / "default_fit"
RULE = FitRule(steps_checked=1, slow_rate=0.1, measures=("peak_mass", "chunk_agreement", "view_agreement"))


def test_the_shipped_thresholds_are_the_fit_of_the_committed_data(tmp_path):
    runs = []
    for gz in sorted(FIT.glob("*/confidence.jsonl.gz")):
        run = tmp_path / gz.parent.name
        run.mkdir()
        with gzip.open(gz, "rb") as src, open(run / "confidence.jsonl", "wb") as dst:
            shutil.copyfileobj(src, dst)
        runs.append(run)
    assert {r.name for r in runs} == {"nominal", "blue_cube", "knocked", "covered", "frozen", "occluder"}
    episodes = load_confidence(runs)
    assert len(episodes) == 150 and sum(e.success for e in episodes) == 110
    fitted = fit_thresholds(episodes, RULE)
    shipped = yaml.safe_load((REPO / "config" / "executor.yaml").read_text())["chunk_executor"]["ros__parameters"]
    for measure, t in fitted.items():
        assert shipped[f"confidence_{measure}_slow_below"] == t["slow"], measure
        assert shipped[f"confidence_{measure}_hold_below"] == t["hold"], measure
    assert shipped["confidence_steps_checked"] == RULE.steps_checked
    assert shipped["confidence_hold_after_s"] == RULE.hold_after_s
    # the promise of the rule on its own data: at most 2 % of the successful episodes held
    held = rates(episodes, supervisor_config(fitted, RULE))["successful"]["held"]
    assert held <= 0.02 * 110
