"""para-sim agreement: per-episode agreement of two evaluation reports, against hand-counted tables."""

from __future__ import annotations

import json

import pytest

from para_ros.commands import sim as sim_cli
from para_ros.deploy.report_agreement import agreement, format_agreement, load_eval_report


def write_report(path, outcomes: dict, **settings):
    path.mkdir(parents=True, exist_ok=True)
    base = {"checkpoint": "checkpoints/pick_place", "lockstep": True, "node_params": {}, "out": str(path)}
    episodes = [{"episode": i, "seed": s, "outcome": o} for i, (s, o) in enumerate(outcomes.items())]
    (path / "report.json").write_text(json.dumps({"settings": {**base, **settings}, "episodes": episodes}))
    return path


def test_agreement_counts_same_outcomes_on_the_common_seeds_only(tmp_path):
    a = write_report(tmp_path / "a", {1: "success", 2: "success", 3: "no_grasp", 4: "success", 5: "timeout"})
    b = write_report(tmp_path / "b", {2: "success", 3: "misplaced", 4: "success", 5: "timeout", 6: "success"})
    r = agreement(a, b)
    # common seeds 2..5; seed 3 failed both times but differently: not the same outcome
    assert r["seeds"] == 4 and r["same_outcome"] == 3 and r["agreement"] == 0.75
    assert r["differing"] == [{"seed": 3, "a": "no_grasp", "b": "misplaced"}]
    assert r["rates"]["a"]["successes"] == 2 and r["rates"]["b"]["successes"] == 2
    # Wilson 95 % of 2/4 by hand: centre 0.5, half-width 1.96 * sqrt(0.0625 + 0.0600) / 1.9604 = 0.3500
    assert r["rates"]["a"]["wilson95"] == pytest.approx([0.1500, 0.8500], abs=2e-4)
    p = r["paired"]
    assert (p["both"], p["a_only"], p["b_only"], p["neither"], p["mcnemar_p"]) == (2, 0, 0, 2, 1.0)
    assert r["rate_difference_points"] == 0.0 and r["settings_differ"] == []
    text = format_agreement(r)
    assert "3/4 seeds (75.0 %)" in text and "3 (no_grasp / misplaced)" in text


def test_agreement_rate_difference_mcnemar_and_configuration(tmp_path):
    a = write_report(tmp_path / "a", {s: "success" for s in range(10)})
    b = write_report(
        tmp_path / "b",
        {s: ("timeout" if s in (1, 4, 7) else "success") for s in range(10)},
        lockstep=False,
        node_params={"chunk_executor": {"lockstep_latency_s": 0.2}},
    )
    r = agreement(a, b)
    assert r["same_outcome"] == 7 and r["rate_difference_points"] == pytest.approx(30.0)
    # 3 discordant seeds, all A: two-sided exact p = 2 * (1/2)^3
    assert r["paired"]["a_only"] == 3 and r["paired"]["mcnemar_p"] == pytest.approx(0.25)
    assert r["settings_differ"] == [
        "lockstep: True vs False",
        "node_params: {} vs {'chunk_executor': {'lockstep_latency_s': 0.2}}",
    ]
    assert "differ in configuration" in format_agreement(r)


def test_bad_reports_are_refused_with_the_file_named(tmp_path, capsys):
    good = write_report(tmp_path / "good", {1: "success"})
    other = write_report(tmp_path / "other", {2: "success"})
    (tmp_path / "ab").mkdir()
    ab_episodes = {"argmax": [{"seed": 1, "outcome": "success"}], "fused": [{"seed": 1, "outcome": "no_grasp"}]}
    ab = {"settings": {}, "node": "inference_node", "parameter": "decoding", "episodes": ab_episodes}
    (tmp_path / "ab" / "report.json").write_text(json.dumps(ab))
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(ValueError, match="no such report"):
        load_eval_report(tmp_path / "missing")
    with pytest.raises(ValueError, match="an A/B report: name one of its variants.*argmax, fused"):
        load_eval_report(tmp_path / "ab")
    with pytest.raises(ValueError, match="not an A/B report"):
        load_eval_report(f"{good}#fused")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "report.json").write_text(json.dumps({"episodes": [{"seed": 1}]}))
    with pytest.raises(ValueError, match="not a para-sim eval report"):
        load_eval_report(tmp_path / "bad")
    r = agreement(f"{tmp_path / 'ab'}#argmax", f"{tmp_path / 'ab'}#fused")  # two variants of one A/B run
    assert r["same_outcome"] == 0 and r["paired"]["a_only"] == 1
    assert r["settings_differ"] == ["compared: 'inference_node:decoding=argmax' vs 'inference_node:decoding=fused'"]
    with pytest.raises(ValueError, match="not a JSON report"):
        load_eval_report(tmp_path / "junk.json")
    with pytest.raises(ValueError, match="share no seed"):
        agreement(good, other)
    assert sim_cli.main(["agreement", str(good), str(tmp_path / "ab")]) == 2
    assert "para-sim agreement:" in capsys.readouterr().err
    out_json = tmp_path / "agree.json"
    assert sim_cli.main(["agreement", str(good), str(good), "--json", str(out_json)]) == 0
    assert json.loads(out_json.read_text())["same_outcome"] == 1
