"""para-sim confidence-report: the fitted thresholds reproduce from the same files, match a brute-force search with
the supervisor itself on a synthetic set, and keep their promised rates; the files it reads, and bad ones."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from para_ros.deploy.closed_loop import CONFIDENCE_FILE, append_confidence
from para_ros.deploy.confidence_report import (
    FitRule,
    chunk_worst,
    fit_thresholds,
    load_confidence,
    rates,
    supervisor_config,
    sustained_worst,
    write_report,
)
from para_ros.deploy.episodes import EpisodeRow
from para_ros.execution.chunk import Chunk
from para_ros.execution.confidence_supervisor import ConfidenceSupervisor, SupervisorConfig
from para_ros.execution.executor_state import ExecutorEvent

T = 6  # steps per chunk
DT_S = 0.2  # chunk period


def synthetic_run(folder, seed=0, n_success=40, n_fail=15):
    """A run folder whose confidence.jsonl holds successful episodes (confident, with short dips) and failing ones
    (long spells of low peak mass and a foggy entropy), written as para-sim eval writes it."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for k in range(n_success + n_fail):
        ok = k < n_success
        n = int(rng.integers(15, 40))
        peak = np.clip(rng.normal(0.7 if ok else 0.35, 0.15, (n, T)), 0, 1)
        if ok and rng.random() < 0.5:  # a short dip: one or two chunks
            i = int(rng.integers(0, n - 2))
            peak[i : i + int(rng.integers(1, 3))] *= rng.uniform(0.05, 0.5)
        if not ok:  # a long spell
            i = int(rng.integers(0, n // 2))
            peak[i : i + int(rng.integers(4, 12))] *= rng.uniform(0.05, 0.4)
        entropy = np.clip(1.0 - peak + rng.normal(0, 0.05, (n, T)), 0, 1)
        chunks = [
            {
                "stamp_s": round(10.0 + DT_S * c + rng.uniform(0, 0.02), 6),
                "peak_mass": [round(float(v), 6) for v in peak[c]],
                "entropy": [round(float(v), 6) for v in entropy[c]],
                "chunk_agreement": [],
                "view_agreement": [],
            }
            for c in range(n)
        ]
        row = EpisodeRow(k, 1000 + k, "success" if ok else "no_grasp", 5.0, 0.01, 0.1, n, 0)
        append_confidence(folder / CONFIDENCE_FILE, row, chunks)
    return folder


def test_sustained_worst_by_hand():
    values = np.array([0.9, 0.1, 0.2, 0.05, 0.8])
    stamps = np.array([0.0, 0.25, 0.5, 0.75, 1.0])  # exact in binary: the supervisor's >= compares them as they are
    # runs spanning 0.5 s: chunks 0-2 (max 0.9), 1-3 (max 0.2), 2-4 (max 0.8); 3-4 spans only 0.25 s
    assert sustained_worst(values, stamps, 0.5, "peak_mass") == 0.2
    assert sustained_worst(values, stamps, 0.0, "peak_mass") == 0.05  # any single chunk
    assert sustained_worst(values, stamps, 10.0, "peak_mass") == math.inf  # no run that long
    assert sustained_worst(1 - values, stamps, 0.5, "entropy") == pytest.approx(0.8)  # the mirror image
    with_gap = np.array([0.1, np.nan, 0.1, 0.1])  # a chunk without the measure ends a run
    assert sustained_worst(with_gap, np.array([0.0, 0.25, 0.5, 0.75]), 0.5, "peak_mass") == math.inf


def _chunks(episodes) -> list[list[Chunk]]:
    """The successful episodes' chunks, as the executor would hand them to the supervisor."""
    result = []
    for e in episodes:
        if not e.success:
            continue
        chunks = []
        for i, stamp in enumerate(e.stamps_s):
            n = len(e.measures["peak_mass"][i])
            chunks.append(
                Chunk(
                    float(stamp),
                    np.arange(n, dtype=float),
                    np.zeros((n, 3)),
                    np.tile([0.0, 0.0, 0.0, 1.0], (n, 1)),
                    np.zeros(n),
                    e.measures["peak_mass"][i],
                    entropy=e.measures["entropy"][i],
                )
            )
        result.append(chunks)
    return result


def _held(episodes, config) -> int:
    """Successful episodes the supervisor holds at ``config``: a plain replay, chunk by chunk."""
    count = 0
    for chunks in episodes if isinstance(episodes[0], list) else _chunks(episodes):
        sup = ConfidenceSupervisor(config)
        if any(sup.judge(c, c.stamp_s).event is ExecutorEvent.CHUNK_VERY_UNCERTAIN for c in chunks):
            count += 1
    return count


@pytest.mark.parametrize("resolution", [0.01, None])
def test_the_hold_threshold_is_the_brute_force_one(tmp_path, resolution):
    """Peak mass alone, 20 successful episodes, hold_rate 0.1: at most 2 held. Searching every candidate threshold
    (a 0.01 grid, or every value of the successful chunks for exact thresholds) with the supervisor's own replay
    finds the same most demanding threshold as the fit."""
    episodes = load_confidence([synthetic_run(tmp_path / "run", n_success=20, n_fail=5)])
    rule = FitRule(hold_rate=0.1, slow_rate=0.5, measures=("peak_mass",), resolution=resolution)  # slowing: no bound
    fitted = fit_thresholds(episodes, rule)["peak_mass"]
    allowed = math.floor(0.1 * 20)
    if resolution is None:
        values = np.concatenate([chunk_worst(e, "peak_mass") for e in episodes if e.success])
        candidates = np.unique(np.concatenate([values, [0.0, 1.0]]))
    else:
        candidates = np.round(np.arange(0, 101) * 0.01, 2)
    chunks = _chunks(episodes)
    best = max(
        c
        for c in candidates
        if _held(
            chunks, SupervisorConfig(enabled=True, peak_mass_slow_below=c, peak_mass_hold_below=c, hold_after_s=0.5)
        )
        <= allowed
    )
    assert fitted["hold"] == pytest.approx(best, abs=1e-12)
    assert 0.0 < best < 1.0  # the search had something to find
    over = SupervisorConfig(enabled=True, peak_mass_slow_below=1.0, peak_mass_hold_below=min(best + 0.01, 1.0))
    assert _held(chunks, SupervisorConfig(**{**over.__dict__, "hold_after_s": 0.5})) > allowed  # one step more


def test_the_entropy_threshold_is_the_mirror_image(tmp_path):
    episodes = load_confidence([synthetic_run(tmp_path / "run", seed=3, n_success=20, n_fail=5)])
    rule = FitRule(hold_rate=0.1, slow_rate=0.5, measures=("entropy",), hold_after_s=0.5)  # slowing: no bound
    fitted = fit_thresholds(episodes, rule)["entropy"]
    allowed = math.floor(0.1 * 20)
    candidates = np.round(np.arange(0, 101) * 0.01, 2)
    chunks = _chunks(episodes)
    best = min(
        c
        for c in candidates
        if _held(chunks, SupervisorConfig(enabled=True, entropy_slow_above=c, entropy_hold_above=c, hold_after_s=0.5))
        <= allowed
    )
    assert fitted["hold"] == pytest.approx(best) and 0.0 < best < 1.0


def test_the_slow_threshold_is_the_brute_force_chunk_quantile(tmp_path):
    """At most slow_rate of the successful episodes' chunks beyond it: a plain count over the chunks' worst steps;
    the hold threshold is never more demanding."""
    episodes = load_confidence([synthetic_run(tmp_path / "run", seed=5)])
    rule = FitRule(hold_rate=0.05, slow_rate=0.1, measures=("peak_mass",))
    fitted = fit_thresholds(episodes, rule)["peak_mass"]
    worst = [min(values) for e in episodes if e.success for values in e.measures["peak_mass"]]
    allowed = math.floor(0.1 * len(worst))
    best = max(c for c in np.round(np.arange(0, 101) * 0.01, 2) if sum(w < c for w in worst) <= allowed)
    assert fitted["slow"] == pytest.approx(best) and fitted["hold"] <= fitted["slow"]


def test_the_fit_reproduces_from_the_same_files_and_keeps_its_rates(tmp_path):
    run = synthetic_run(tmp_path / "run", seed=7)
    rule = FitRule(hold_rate=0.05)
    a = write_report([run], rule, tmp_path / "a")
    b = write_report([run], rule, tmp_path / "b")
    assert json.dumps(a) == json.dumps(b)  # every figure, NaN included
    assert json.loads((tmp_path / "a" / "confidence_report.json").read_text())["thresholds"] == a["thresholds"]
    assert set(a["thresholds"]) == {"peak_mass", "entropy"}  # the agreements were not measured in this run
    r = a["rates"]
    assert r["successful"]["held_rate"] <= 0.05  # the promises of the rule, all measures together
    assert r["successful"]["chunks_slowed_or_held_rate"] <= rule.slow_rate
    assert r["failing"]["held"] > 0 and r["failing"]["example_reason"].startswith("policy uncertain:")
    assert (tmp_path / "a" / "confidence_report.png").stat().st_size > 10_000
    yaml_text = (tmp_path / "a" / "confidence_thresholds.yaml").read_text()
    assert f"confidence_peak_mass_hold_below: {a['thresholds']['peak_mass']['hold']}" in yaml_text
    assert "| peak mass |" in (tmp_path / "a" / "confidence_report.md").read_text()
    # the replay's rates are the supervisor's: recount the false holds by hand
    episodes = load_confidence([run])
    assert _held(episodes, supervisor_config(a["thresholds"], rule)) == r["successful"]["held"]
    assert json.dumps(rates(episodes, supervisor_config(a["thresholds"], rule))) == json.dumps(r)


def test_a_continued_run_keeps_the_last_line_of_a_seed_and_faults_are_left_out(tmp_path):
    path = tmp_path / CONFIDENCE_FILE
    chunk = {"stamp_s": 1.0, "peak_mass": [0.5], "entropy": [], "chunk_agreement": [], "view_agreement": []}
    append_confidence(path, EpisodeRow(0, 7, "fault", 0.0, 0.0, 0.0, 0, 0), [chunk])
    append_confidence(path, EpisodeRow(0, 7, "success", 1.0, 0.0, 0.0, 1, 0), [chunk])
    append_confidence(path, EpisodeRow(1, 8, "fault", 0.0, 0.0, 0.0, 0, 0), [])
    episodes = load_confidence([tmp_path])
    assert [(e.seed, e.outcome) for e in episodes] == [(7, "success")]


def test_bad_files_are_refused_with_the_file_named(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        load_confidence([tmp_path / "nothing"])
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / CONFIDENCE_FILE).write_text('{"episode": 0}\n')
    with pytest.raises(ValueError, match=r"confidence.jsonl:1: not an episode line"):
        load_confidence([bad])
    failing = tmp_path / "failing"
    failing.mkdir()
    append_confidence(failing / CONFIDENCE_FILE, EpisodeRow(0, 1, "timeout", 30.0, 0.1, 0.0, 1, 0), [])
    with pytest.raises(ValueError, match="no successful episode"):
        fit_thresholds(load_confidence([failing]), FitRule())
    with pytest.raises(ValueError, match="measures"):
        FitRule(measures=("peak",))


def test_the_evaluation_records_a_chunks_measures_from_its_message():
    from para_ros.deploy.episodes import confidence_record
    from para_ros.ros_io.chunk_msg import chunk_to_msg

    n = 3
    chunk = Chunk(
        12.5,
        np.arange(n) * 0.2,
        np.zeros((n, 3)),
        np.tile([0.0, 0.0, 0.0, 1.0], (n, 1)),
        np.ones(n),
        np.array([0.9, 0.5, 0.25]),
        entropy=np.array([0.1, 0.2, 0.3]),
        view_agreement=np.array([1.0, 0.75, 0.5]),
    )
    record = confidence_record(chunk_to_msg(chunk))
    assert record["stamp_s"] == 12.5 and record["chunk_agreement"] == []
    assert record["peak_mass"] == [0.9, 0.5, 0.25] and record["view_agreement"] == [1.0, 0.75, 0.5]
    assert record["entropy"] == pytest.approx([0.1, 0.2, 0.3], abs=1e-6)  # float32 on the wire, 6 decimals kept


def _constant_run(folder, episodes):
    """A run of constant-valued episodes: [(outcome, peak mass, chunk agreement)], 20 chunks 0.2 s apart each."""
    folder.mkdir(parents=True, exist_ok=True)
    for k, (outcome, peak, agreement) in enumerate(episodes):
        chunks = [
            {
                "stamp_s": 10.0 + DT_S * c,
                "peak_mass": [peak] * T,
                "entropy": [],
                "chunk_agreement": [agreement] * T,
                "view_agreement": [],
            }
            for c in range(20)
        ]
        append_confidence(folder / CONFIDENCE_FILE, EpisodeRow(k, 1000 + k, outcome, 5.0, 0.01, 0.1, 20, 0), chunks)
    return folder


@pytest.mark.parametrize("same_outlier", [True, False])
def test_measures_that_stop_the_same_episode_spend_the_hold_budget_once(tmp_path, same_outlier):
    """50 successful episodes (budget: floor(0.02 * 50) = 1 held): confident ones (0.9) and one or two outliers at
    0.2; three failing episodes with a low peak mass (0.4), two with a low chunk agreement (0.5).

    One outlier low in both measures: each measure may hold it, together they still hold one successful episode, and
    both thresholds sit at 0.9 (every failing episode held; halving the budget per measure would hold none). Two
    outliers, one per measure: both at 0.9 would hold two, so one measure keeps its budget: the peak mass, which
    catches three failing episodes against two."""
    outliers = [("success", 0.2, 0.2)] if same_outlier else [("success", 0.2, 0.9), ("success", 0.9, 0.2)]
    good = [("success", 0.9, 0.9)] * (50 - len(outliers)) + outliers
    bad = [("no_grasp", 0.4, 0.9)] * 3 + [("no_grasp", 0.9, 0.5)] * 2
    episodes = load_confidence([_constant_run(tmp_path / "run", good + bad)])
    rule = FitRule(hold_rate=0.02, slow_rate=0.5, measures=("peak_mass", "chunk_agreement"))
    fitted = fit_thresholds(episodes, rule)
    config = supervisor_config(fitted, rule)
    if same_outlier:
        assert (fitted["peak_mass"]["hold"], fitted["chunk_agreement"]["hold"]) == (0.9, 0.9)
        assert _held(episodes, config) == 1
        assert rates(episodes, config)["failing"]["held"] == 5
    else:
        assert (fitted["peak_mass"]["hold"], fitted["chunk_agreement"]["hold"]) == (0.9, 0.2)
        assert _held(episodes, config) == 1
        assert rates(episodes, config)["failing"]["held"] == 3


def test_given_thresholds_are_judged_as_fitted_ones_and_a_gzipped_run_reads_as_the_plain_one(tmp_path):
    """``para-sim confidence-report --thresholds``: the thresholds a fit wrote, given back, replay to the fit's own
    rates on the same runs (the docs keep runs as confidence.jsonl.gz: the same episodes)."""
    import gzip

    from para_ros.commands import sim as sim_cli

    run = synthetic_run(tmp_path / "run", seed=3)
    packed = tmp_path / "packed"
    packed.mkdir()
    (packed / (CONFIDENCE_FILE + ".gz")).write_bytes(gzip.compress((run / CONFIDENCE_FILE).read_bytes()))
    rule = FitRule(hold_rate=0.05, steps_checked=2)
    fitted = write_report([run], rule, tmp_path / "fit")
    assert sim_cli.main(["confidence-report", str(packed), "--out", str(tmp_path / "judged"),
                         "--thresholds", str(tmp_path / "fit" / "confidence_thresholds.yaml")]) == 0  # fmt: skip
    judged = json.loads((tmp_path / "judged" / "confidence_report.json").read_text())
    assert judged["thresholds_given"] and not fitted["thresholds_given"]
    assert json.dumps(judged["rates"]) == json.dumps(fitted["rates"])
    assert judged["rule"]["steps_checked"] == 2 and set(judged["rule"]["measures"]) == set(fitted["thresholds"])
    for m, t in fitted["thresholds"].items():
        assert (judged["thresholds"][m]["slow"], judged["thresholds"][m]["hold"]) == (t["slow"], t["hold"])
    assert "Thresholds given (not fitted)" in (tmp_path / "judged" / "confidence_report.md").read_text()


def test_given_thresholds_that_cannot_be_read_or_judge_nothing_are_refused(tmp_path, capsys):
    from para_ros.commands import sim as sim_cli

    run = synthetic_run(tmp_path / "run", seed=4, n_success=5, n_fail=2)
    not_params = tmp_path / "not_params.yaml"
    not_params.write_text("sim_node:\n  ros__parameters: {}\n")
    all_off = tmp_path / "off.yaml"
    all_off.write_text(
        "chunk_executor:\n  ros__parameters:\n"
        + "".join(
            f"    confidence_{m}_{k}_below: 0.0\n"
            for m in ("peak_mass", "chunk_agreement", "view_agreement")
            for k in ("slow", "hold")
        )  # fmt: skip
    )
    bad_pair = tmp_path / "bad_pair.yaml"
    bad_pair.write_text(
        "chunk_executor:\n  ros__parameters:\n    confidence_peak_mass_slow_below: 0.2\n"
        "    confidence_peak_mass_hold_below: 0.5\n"
    )
    for path, why in [
        (tmp_path / "missing.yaml", "No such file"),
        (not_params, "not a chunk_executor parameters file"),
        (all_off, "switch every measure off"),
        (bad_pair, "less strict"),
    ]:
        out = tmp_path / ("out_" + path.stem)
        assert sim_cli.main(["confidence-report", str(run), "--out", str(out), "--thresholds", str(path)]) == 2
        assert why in capsys.readouterr().err
        assert not out.exists(), "a refused report wrote files"
