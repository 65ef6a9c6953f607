"""How the policy's confidence separates the chunks of successful episodes from those of failing ones, and the
confidence supervisor's thresholds fitted from them (docs/confidence.md; ``para-sim confidence-report RUN [RUN ...]``,
whose options live in ``para_ros.commands.sim_confidence``).

Reads the ``confidence.jsonl`` that ``para-sim eval`` writes next to its report (one line per episode: its outcome
and every chunk's confidence measures after the hand-over; ``fault`` episodes are left out) from one or more runs,
e.g. an in-distribution run and runs under conditions the policy never saw. ROS-free: it only reads files.

The fitting rule, per measure (``peak_mass``, ``entropy``, ``chunk_agreement``, ``view_agreement``), with each chunk
reduced to its worst value over its first ``steps_checked`` steps (``para_core.model.confidence.worst_step``), as the
supervisor reduces it:

- **hold threshold**: the supervisor holds an episode at threshold h once every chunk for ``hold_after_s`` (stamps
  apart) is beyond h; the episode's *sustained worst* is the least extreme value that was held that long (the
  smallest, over the runs of chunks spanning ``hold_after_s``, of the run's largest value; the mirror image for the
  entropy), and it is held at h exactly when its sustained worst is beyond h. The budget is ``K = floor(hold_rate *
  S)`` of the S successful episodes, for all the measures together. Each measure's candidates are the most demanding
  thresholds that hold at most ``a = 0 .. K`` of the successful episodes alone (rounded to ``resolution`` towards the
  safe side); of every combination of candidates (one per measure), the supervisor's replay keeps those that hold at
  most K successful episodes together, and the fit takes the one that holds the most failing episodes, then the most
  demanding (the largest total ``a``), then the first in the measures' order. Measures that stop the same episode
  spend the budget once, where splitting it (``hold_rate / M`` each) would leave each measure nothing at a hundred
  episodes; with one measure it is that measure's most demanding threshold;
- **slow threshold**: the most demanding one beyond which at most ``slow_rate / M`` of the successful episodes'
  chunks lie (rounded the same way: all measures together slow at most ``slow_rate`` of them); where the hold
  threshold came out more demanding than that, it is lowered to the slow one (a hold must never come before
  slowing, and lowering it only holds fewer episodes: both promises stay kept).

Then the supervisor itself (``para_ros.execution.confidence_supervisor``) replays every episode's chunks at the fitted
thresholds: the share of successful episodes it would have held (false holds), of failing ones it would have held
(caught), how soon, and the share of chunks it would have slowed. Written: ``confidence_report.json``, ``.md`` and
``.png`` (per measure: the sustained worst of successful vs failing episodes, and the chunks' worst values, with the
thresholds), and ``confidence_thresholds.yaml`` (the executor's ``confidence_*`` parameters).
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from para_core.model.confidence import HIGH_IS_BAD, MEASURE_TITLES, MEASURES, worst_step
from para_ros.execution.chunk import Chunk
from para_ros.execution.confidence_supervisor import THRESHOLD_FIELDS, ConfidenceSupervisor, SupervisorConfig
from para_ros.execution.executor_state import ExecutorEvent

CONFIDENCE_FILE = "confidence.jsonl"  # what para-sim eval writes (para_ros.deploy.closed_loop)
NOT_JUDGED = ("fault",)  # outcomes that are no attempt: left out


@dataclass
class EpisodeConfidence:
    """One episode of one run: its outcome and its chunks (stamps (n,) s; per measure a list of (T,) arrays)."""

    run: str
    episode: int
    seed: int
    outcome: str
    stamps_s: np.ndarray
    measures: dict[str, list[np.ndarray]]

    @property
    def success(self) -> bool:
        return self.outcome == "success"


def load_confidence(paths) -> list[EpisodeConfidence]:
    """The episodes of the runs at ``paths`` (folders holding ``confidence.jsonl`` or ``confidence.jsonl.gz``, as
    the reports in docs/ keep them, or the files); the last line of a seed wins (a continued evaluation appends).
    ValueError naming the file when it is missing or malformed."""
    episodes: list[EpisodeConfidence] = []
    for path in paths:
        p = Path(path)
        if p.is_dir():
            packed = p / (CONFIDENCE_FILE + ".gz")
            p = packed if packed.is_file() and not (p / CONFIDENCE_FILE).is_file() else p / CONFIDENCE_FILE
        if not p.is_file():
            raise ValueError(f"{p}: no such file (para-sim eval writes OUT/{CONFIDENCE_FILE})")
        try:
            text = gzip.decompress(p.read_bytes()).decode() if p.suffix == ".gz" else p.read_text()
        except (OSError, UnicodeDecodeError, EOFError) as exc:
            raise ValueError(
                f"{p}: not readable as {'gzip-compressed ' if p.suffix == '.gz' else ''}text ({exc})"
            ) from None
        by_seed: dict[int, EpisodeConfidence] = {}
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                chunks = row["chunks"]
                ep = EpisodeConfidence(
                    run=str(p.parent),
                    episode=int(row["episode"]),
                    seed=int(row["seed"]),
                    outcome=str(row["outcome"]),
                    stamps_s=np.array([float(c["stamp_s"]) for c in chunks]),
                    measures={m: [np.asarray(c.get(m, []), dtype=np.float64) for c in chunks] for m in MEASURES},
                )
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"{p}:{n}: not an episode line of para-sim eval ({exc!r})") from None
            by_seed[ep.seed] = ep
        episodes.extend(e for e in by_seed.values() if e.outcome not in NOT_JUDGED)
    return episodes


def chunk_worst(episode: EpisodeConfidence, measure: str, steps_checked: int = 0) -> np.ndarray:
    """(n,) each chunk's worst value of ``measure`` over its first ``steps_checked`` steps (0: all); NaN where the
    chunk does not carry it."""
    steps = steps_checked or None
    result = []
    for values in episode.measures[measure]:
        worst = worst_step(measure, values, steps)
        result.append(np.nan if worst is None else worst.value)
    return np.array(result, dtype=np.float64)


def sustained_worst(values: np.ndarray, stamps_s: np.ndarray, hold_after_s: float, measure: str) -> float:
    """The least extreme value that every chunk of some run spanning ``hold_after_s`` reached (module docstring):
    for a "low is bad" measure the smallest, over runs i..j with ``stamps[j] - stamps[i] >= hold_after_s``, of
    ``max(values[i..j])``; for the entropy the largest of the runs' minimum. +inf (-inf for the entropy) when no run
    is that long; a chunk without the measure ends a run."""
    high = measure in HIGH_IS_BAD
    v = np.asarray(values, dtype=np.float64)
    v = np.where(np.isnan(v), -np.inf if high else np.inf, v)  # an unmeasured chunk is never beyond any threshold
    if high:
        v = -v
    best = np.inf
    n = len(v)
    for i in range(n):
        running = -np.inf
        for j in range(i, n):
            running = max(running, v[j])
            if running >= best:
                break
            if stamps_s[j] - stamps_s[i] >= hold_after_s:
                best = running
                break
    return float(-best if high else best)


@dataclass
class FitRule:
    """The documented rule (module docstring) and the supervisor settings it fits for.

    Args:
        hold_rate: at most this share of the successful episodes held, all fitted measures together.
        slow_rate: at most this share of the successful episodes' chunks slowed, all fitted measures together.
        steps_checked, hold_after_s, resume_after_chunks, slow_speed_scale: the supervisor's (SupervisorConfig).
        resolution: thresholds rounded to this, towards the safe side (None: exact).
        measures: the measures fitted (the others stay off).
    """

    hold_rate: float = 0.02
    slow_rate: float = 0.05
    steps_checked: int = 0
    hold_after_s: float = 0.5
    resume_after_chunks: int = 3
    slow_speed_scale: float = 0.3
    resolution: float | None = 0.01
    measures: tuple[str, ...] = MEASURES

    def __post_init__(self):
        for name in ("hold_rate", "slow_rate"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0.0 <= value < 1.0):
                raise ValueError(f"{name}={value!r}: use a share in [0, 1)")
        unknown = [m for m in self.measures if m not in MEASURES]
        if unknown or not self.measures:
            raise ValueError(f"measures={list(self.measures)!r}: use one or more of {list(MEASURES)}")
        if self.resolution is not None and not (0 < self.resolution <= 0.5):
            raise ValueError(f"resolution={self.resolution!r}: use a step in (0, 0.5], or None for exact thresholds")
        SupervisorConfig(  # the supervisor's own checks of its settings
            steps_checked=self.steps_checked,
            hold_after_s=self.hold_after_s,
            resume_after_chunks=self.resume_after_chunks,
            slow_speed_scale=self.slow_speed_scale,
        )


def episode_sustained_worst(episode: EpisodeConfidence, measure: str, rule: FitRule) -> float:
    """:func:`sustained_worst` of one episode's chunks under ``rule``'s steps checked and hold time."""
    return sustained_worst(
        chunk_worst(episode, measure, rule.steps_checked), episode.stamps_s, rule.hold_after_s, measure
    )


def _rounded(value: float, measure: str, resolution: float | None) -> float:
    """``value`` clipped to [0, 1] and rounded towards the less demanding side (down for "low is bad", up for the
    entropy), so that the rounded threshold stops no more than the exact one."""
    value = float(np.clip(value, 0.0, 1.0))
    if resolution is None:
        return value
    steps = value / resolution
    steps = math.ceil(steps - 1e-9) if measure in HIGH_IS_BAD else math.floor(steps + 1e-9)
    return float(np.clip(round(steps * resolution, 10), 0.0, 1.0))


def most_demanding(values: np.ndarray, allowed: int, measure: str) -> float:
    """The most demanding threshold that at most ``allowed`` of ``values`` are strictly beyond: for "low is bad" the
    ``allowed``-th smallest value (1 when there are not more values than that), for the entropy the mirror image."""
    v = np.sort(np.asarray(values, dtype=np.float64))
    if measure in HIGH_IS_BAD:
        v = v[::-1]
        return float(v[allowed]) if allowed < len(v) else 0.0
    return float(v[allowed]) if allowed < len(v) else 1.0


def fit_thresholds(episodes: list[EpisodeConfidence], rule: FitRule) -> dict[str, dict]:
    """Per fitted measure: ``slow`` and ``hold`` thresholds and the figures they came from (module docstring).
    ValueError when there is no successful episode to fit on."""
    good = [e for e in episodes if e.success]
    if not good:
        raise ValueError("no successful episode in the runs: the thresholds are fitted on successful episodes")
    allowed_episodes = math.floor(rule.hold_rate * len(good) + 1e-9)  # all the measures together
    fitted, candidates = {}, {}
    for m in rule.measures:
        sustained = np.array([episode_sustained_worst(e, m, rule) for e in good])
        sustained = sustained[np.isfinite(sustained)]  # an episode with no run that long is never held
        chunks = np.concatenate([chunk_worst(e, m, rule.steps_checked) for e in good])
        chunks = chunks[np.isfinite(chunks)]
        if chunks.size == 0:
            continue  # not measured in these runs: stays off
        allowed_chunks = math.floor(rule.slow_rate / len(rule.measures) * len(chunks) + 1e-9)
        slow = _rounded(most_demanding(chunks, allowed_chunks, m), m, rule.resolution)
        candidates[m] = [_hold_candidate(sustained, a, slow, m, rule) for a in range(allowed_episodes + 1)]
        fitted[m] = {
            "slow": slow,
            "successful_episodes": len(good),
            "held_allowed": allowed_episodes,
            "successful_chunks": int(len(chunks)),
            "slowed_allowed": allowed_chunks,
        }
    for m, a in _joint_holds(episodes, fitted, candidates, allowed_episodes, rule).items():
        fitted[m]["hold"] = candidates[m][a]
        fitted[m]["held_alone_allowed"] = a
    return fitted


def _hold_candidate(sustained: np.ndarray, allowed: int, slow: float, measure: str, rule: FitRule) -> float:
    """The most demanding hold threshold of one measure that holds at most ``allowed`` of the successful episodes
    whose sustained worst values are ``sustained``, never more demanding than the slow threshold."""
    if sustained.size:
        hold = _rounded(most_demanding(sustained, allowed, measure), measure, rule.resolution)
    else:
        hold = 1.0 if measure in HIGH_IS_BAD else 0.0
    return max(slow, hold) if measure in HIGH_IS_BAD else min(slow, hold)  # holding stops no more than slowing


MAX_COMBINATIONS = 4096  # of hold candidates the joint fit replays (e.g. 4 measures with 0..7 episodes each)


def _joint_holds(episodes, fitted: dict, candidates: dict, allowed: int, rule: FitRule) -> dict[str, int]:
    """Per measure, how many successful episodes its hold threshold may stop alone (an index into
    ``candidates[m]``): the combination the module docstring's rule picks, by replaying the supervisor."""
    measures = list(candidates)
    if len(measures) <= 1:
        return {m: allowed for m in measures}
    combos = list(itertools.product(range(allowed + 1), repeat=len(measures)))
    if len(combos) > MAX_COMBINATIONS:
        raise ValueError(
            f"{len(combos)} combinations of hold thresholds to replay ({len(measures)} measures, up to {allowed} "
            f"episodes each): fit fewer measures or a lower --hold-rate (at most {MAX_COMBINATIONS})"
        )
    good = [e for e in episodes if e.success]
    bad = [e for e in episodes if not e.success]
    best, best_key = None, None
    for combo in combos:
        trial = {m: {**fitted[m], "hold": candidates[m][a]} for m, a in zip(measures, combo, strict=True)}
        config = supervisor_config(trial, rule)
        if sum(replay(e, config).held for e in good) > allowed:
            continue
        key = (sum(replay(e, config).held for e in bad), sum(combo), [-a for a in combo])
        if best_key is None or key > best_key:
            best, best_key = combo, key
    return dict(zip(measures, best, strict=True))  # (0, ..., 0) always qualifies: each holds none alone


def supervisor_config(fitted: dict[str, dict], rule: FitRule) -> SupervisorConfig:
    """The supervisor with the fitted thresholds (the others off)."""
    values = {}
    for m, t in fitted.items():
        slow_name, hold_name = THRESHOLD_FIELDS[m]
        values[slow_name], values[hold_name] = t["slow"], t["hold"]
    return SupervisorConfig(
        enabled=True,
        steps_checked=rule.steps_checked,
        hold_after_s=rule.hold_after_s,
        resume_after_chunks=rule.resume_after_chunks,
        slow_speed_scale=rule.slow_speed_scale,
        **values,
    )


def _chunk(episode: EpisodeConfidence, i: int) -> Chunk:
    """Chunk ``i`` of ``episode`` with only what the supervisor reads (its measures)."""
    measures = {m: episode.measures[m][i] for m in MEASURES}
    T = len(measures["peak_mass"])
    zeros = np.zeros((T, 3))
    return Chunk(
        float(episode.stamps_s[i]),
        np.arange(T, dtype=float),
        zeros,
        np.tile([0.0, 0.0, 0.0, 1.0], (T, 1)),
        np.zeros(T),
        measures["peak_mass"],
        entropy=measures["entropy"],
        chunk_agreement=measures["chunk_agreement"],
        view_agreement=measures["view_agreement"],
    )


@dataclass
class Replay:
    """What the supervisor would have done in one episode."""

    held: bool = False
    first_hold_s: float = float("nan")  # after the episode's first chunk
    chunks: int = 0
    slowed_or_held: int = 0  # chunks judged uncertain or very uncertain
    reasons: list = field(default_factory=list)


def replay(episode: EpisodeConfidence, config: SupervisorConfig) -> Replay:
    """Judge the episode's chunks in order with a fresh supervisor (the evaluation resumes the executor per episode,
    which forgets the spell), the chunk's stamp as the time it is judged."""
    sup = ConfidenceSupervisor(config)
    result = Replay(chunks=len(episode.stamps_s))
    for i, stamp in enumerate(episode.stamps_s):
        judgement = sup.judge(_chunk(episode, i), float(stamp))
        if judgement.event in (ExecutorEvent.CHUNK_UNCERTAIN, ExecutorEvent.CHUNK_VERY_UNCERTAIN):
            result.slowed_or_held += 1
        if judgement.event is ExecutorEvent.CHUNK_VERY_UNCERTAIN and not result.held:
            result.held, result.first_hold_s = True, float(stamp - episode.stamps_s[0])
            result.reasons.append(judgement.reason)
    return result


def rates(episodes: list[EpisodeConfidence], config: SupervisorConfig) -> dict:
    """The supervisor at ``config`` over the episodes: held and slowed shares of successful and failing ones."""
    out = {}
    groups = {"successful": [e for e in episodes if e.success], "failing": [e for e in episodes if not e.success]}
    for name, group in groups.items():
        reps = [replay(e, config) for e in group]
        held = [r for r in reps if r.held]
        chunks = sum(r.chunks for r in reps)
        out[name] = {
            "episodes": len(group),
            "held": len(held),
            "held_rate": len(held) / len(group) if group else float("nan"),
            "first_hold_median_s": float(np.median([r.first_hold_s for r in held])) if held else float("nan"),
            "chunks": chunks,
            "chunks_slowed_or_held_rate": sum(r.slowed_or_held for r in reps) / chunks if chunks else float("nan"),
            "example_reason": held[0].reasons[0] if held else "",
        }
    return out


def auroc(success_values: np.ndarray, failure_values: np.ndarray, measure: str) -> float:
    """How well a measure's per-episode value tells failing episodes from successful ones: the probability that a
    random failing episode's value is worse than a random successful one's (ties count half); 0.5 = no separation."""
    s, f = np.asarray(success_values, float), np.asarray(failure_values, float)
    if s.size == 0 or f.size == 0:
        return float("nan")
    if measure in HIGH_IS_BAD:
        s, f = -s, -f
    worse = (f[:, None] < s[None, :]).sum() + 0.5 * (f[:, None] == s[None, :]).sum()
    return float(worse / (s.size * f.size))


def episode_minimum(episode: EpisodeConfidence, measure: str, steps_checked: int) -> float:
    """The episode's single worst chunk value of ``measure`` (NaN if never measured)."""
    v = chunk_worst(episode, measure, steps_checked)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return float("nan")
    return float(v.max() if measure in HIGH_IS_BAD else v.min())


def given_thresholds(config: SupervisorConfig) -> dict[str, dict]:
    """Per measure ``config`` judges (its thresholds not off): its ``slow`` and ``hold`` thresholds, as
    :func:`fit_thresholds` gives them."""
    out = {}
    for m, (slow_name, hold_name) in THRESHOLD_FIELDS.items():
        slow, hold = getattr(config, slow_name), getattr(config, hold_name)
        off = 1.0 if m in HIGH_IS_BAD else 0.0
        if slow != off or hold != off:
            out[m] = {"slow": slow, "hold": hold, "given": True}
    if not out:
        raise ValueError("the thresholds given switch every measure off: nothing to judge")
    return out


def judged_rule(rule: FitRule, given: SupervisorConfig | None) -> FitRule:
    """``rule``, or with ``given`` thresholds their own steps checked, hold time and measures."""
    if given is None:
        return rule
    return replace(
        rule,
        steps_checked=given.steps_checked,
        hold_after_s=given.hold_after_s,
        resume_after_chunks=given.resume_after_chunks,
        slow_speed_scale=given.slow_speed_scale,
        measures=tuple(given_thresholds(given)),
    )


def confidence_report(paths, rule: FitRule, given: SupervisorConfig | None = None) -> dict:
    """Everything the report shows, as one dict (``confidence_report.json``). ``given``: judge these thresholds
    (the supervisor's settings, e.g. the shipped ones) instead of fitting, under :func:`judged_rule`."""
    episodes = load_confidence(paths)
    rule = judged_rule(rule, given)
    if given is None:
        fitted = fit_thresholds(episodes, rule)
        config = supervisor_config(fitted, rule)
    else:
        fitted = given_thresholds(given)
        config = replace(given, enabled=True)
    separation = {}
    for m in rule.measures:
        per_ep = {
            o: np.array([episode_sustained_worst(e, m, rule) for e in episodes if e.success == o]) for o in (1, 0)
        }
        mins = {
            o: np.array([episode_minimum(e, m, rule.steps_checked) for e in episodes if e.success == o]) for o in (1, 0)
        }
        separation[m] = {
            "auroc_sustained_worst": auroc(_finite_or_safe(per_ep[1], m), _finite_or_safe(per_ep[0], m), m),
            "auroc_episode_worst_chunk": auroc(mins[1][np.isfinite(mins[1])], mins[0][np.isfinite(mins[0])], m),
        }
    per_measure = {}
    for m in fitted:
        alone = SupervisorConfig(**{**asdict(config), **_only(m, config)})
        per_measure[m] = rates(episodes, alone)
    return {
        "runs": [str(p) for p in paths],
        "thresholds_given": given is not None,
        "rule": asdict(rule),
        "episodes": len(episodes),
        "successes": sum(e.success for e in episodes),
        "outcomes": {o: sum(e.outcome == o for e in episodes) for o in sorted({e.outcome for e in episodes})},
        "thresholds": fitted,
        "separation": separation,
        "rates": rates(episodes, config),
        "rates_per_measure": per_measure,
        "executor_parameters": executor_parameters(config),
    }


def _finite_or_safe(values: np.ndarray, measure: str) -> np.ndarray:
    """Sustained worst values with "never held that long" as the safest value (1, or 0 for the entropy)."""
    v = np.asarray(values, dtype=np.float64)
    return np.where(np.isfinite(v), v, 0.0 if measure in HIGH_IS_BAD else 1.0)


def _only(measure: str, config: SupervisorConfig) -> dict:
    """Threshold fields that switch every measure but ``measure`` off."""
    off = {}
    for m, (slow, hold) in THRESHOLD_FIELDS.items():
        if m != measure:
            off[slow] = off[hold] = 1.0 if m in HIGH_IS_BAD else 0.0
    return off


def executor_parameters(config: SupervisorConfig) -> dict:
    """The chunk executor's ``confidence_*`` parameters for ``config``."""
    params = {"confidence_supervisor": True}
    names = [n for pair in THRESHOLD_FIELDS.values() for n in pair]
    for name in (*names, "steps_checked", "hold_after_s", "resume_after_chunks", "slow_speed_scale"):
        params[f"confidence_{name}"] = getattr(config, name)
    return params


def format_report(report: dict) -> str:
    """report.md's text."""
    rule, r = report["rule"], report["rates"]
    lines = [
        "# Confidence report",
        "",
        f"Runs: {', '.join(report['runs'])}; {report['episodes']} episodes ({report['successes']} successful; "
        f"outcomes {report['outcomes']}).",
        (
            "Thresholds given (not fitted), judged on these runs; "
            if report.get("thresholds_given")
            else f"Rule: hold at most {rule['hold_rate']:.0%} of the successful episodes (all measures together, by "
            f"replay), slow at most {rule['slow_rate']:.0%} of their chunks (the budget split equally over the "
            "measures); "
        )
        + "steps checked "
        f"{rule['steps_checked'] or 'all'}, "
        f"hold after {rule['hold_after_s']:g} s, resume after {rule['resume_after_chunks']} confident chunks.",
        "",
        "| measure | slow | hold | AUROC (sustained worst) | AUROC (worst chunk) | successful held | failing held |",
        "|---|---|---|---|---|---|---|",
    ]
    for m, t in report["thresholds"].items():
        sep, pm = report["separation"][m], report["rates_per_measure"][m]
        side = ">" if m in HIGH_IS_BAD else "<"
        lines.append(
            f"| {MEASURE_TITLES[m]} | {side} {t['slow']:g} | {side} {t['hold']:g} | {sep['auroc_sustained_worst']:.2f} "
            f"| {sep['auroc_episode_worst_chunk']:.2f} | {pm['successful']['held']}/{pm['successful']['episodes']} "
            f"| {pm['failing']['held']}/{pm['failing']['episodes']} |"
        )
    s, f = r["successful"], r["failing"]
    lines += [
        "",
        f"All {'judged' if report.get('thresholds_given') else 'fitted'} measures together (the supervisor replayed "
        "on every episode's chunks):",
        "",
        f"- successful episodes held (false holds): {s['held']}/{s['episodes']} ({_pct(s['held_rate'])}); their "
        f"chunks slowed or held: {_pct(s['chunks_slowed_or_held_rate'])}",
        f"- failing episodes held (caught): {f['held']}/{f['episodes']} ({_pct(f['held_rate'])}), the first hold a "
        f"median {f['first_hold_median_s']:.1f} s after the hand-over; their chunks slowed or held: "
        f"{_pct(f['chunks_slowed_or_held_rate'])}",
    ]
    if f["example_reason"]:
        lines.append(f"- e.g. `{f['example_reason']}`")
    lines += ["", "Executor parameters (config/executor.yaml or `-p name:=value`):", "", "```yaml"]
    lines += [f"{k}: {json.dumps(v)}" for k, v in report["executor_parameters"].items()]
    lines += ["```", "", "![confidence](confidence_report.png)", ""]
    return "\n".join(lines)


def _pct(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{100 * x:.1f} %"


def plot_report(paths, rule: FitRule, report: dict, out_png: Path) -> Path:
    """Per measure: the sustained worst of successful vs failing episodes (top) and the chunks' worst values (bottom),
    with the fitted slow and hold thresholds."""
    import matplotlib  # matplotlib: loaded on first use, not on import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # matplotlib: loaded on first use, not on import

    episodes = load_confidence(paths)
    measures = list(report["thresholds"])
    fig, axes = plt.subplots(2, max(len(measures), 1), figsize=(4.2 * max(len(measures), 1), 6.5), squeeze=False)
    bins = np.linspace(0, 1, 41)
    for col, m in enumerate(measures):
        t = report["thresholds"][m]
        panels = (
            (
                "episodes: sustained worst",
                lambda e, m=m: [_finite_or_safe([episode_sustained_worst(e, m, rule)], m)[0]],
            ),
            ("chunks: worst step", lambda e, m=m: list(chunk_worst(e, m, rule.steps_checked))),
        )
        for row, (what, values_of) in enumerate(panels):
            ax = axes[row][col]
            for ok, colour, label in ((True, "tab:green", "successful"), (False, "tab:red", "failing")):
                vals = np.array([v for e in episodes if e.success == ok for v in values_of(e)], dtype=float)
                vals = vals[np.isfinite(vals)]
                if vals.size:
                    ax.hist(vals, bins=bins, density=row == 1, alpha=0.5, color=colour, label=f"{label} ({vals.size})")
            ax.set_ylabel("episodes" if row == 0 else "density of chunks", fontsize=8)
            ax.axvline(t["slow"], color="tab:orange", ls="--", label=f"slow {t['slow']:g}")
            ax.axvline(t["hold"], color="k", ls="-", label=f"hold {t['hold']:g}")
            ax.set_title(f"{MEASURE_TITLES[m]} - {what}", fontsize=9)
            ax.legend(fontsize=7)
    s, f = report["rates"]["successful"], report["rates"]["failing"]
    fig.suptitle(
        f"false holds {s['held']}/{s['episodes']} successful episodes, caught {f['held']}/{f['episodes']} failing ones",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    return out_png


def write_report(paths, rule: FitRule, out: Path, given: SupervisorConfig | None = None) -> dict:
    """Fit (or take ``given``), replay and write ``confidence_report.{json,md,png}`` and
    ``confidence_thresholds.yaml`` into ``out``."""
    report = confidence_report(paths, rule, given)
    rule = judged_rule(rule, given)  # the plot judges as the report did
    out.mkdir(parents=True, exist_ok=True)
    (out / "confidence_report.json").write_text(json.dumps(report, indent=2))
    (out / "confidence_report.md").write_text(format_report(report))
    plot_report(paths, rule, report, out / "confidence_report.png")
    yaml_lines = ["chunk_executor:", "  ros__parameters:"]
    yaml_lines += [f"    {k}: {json.dumps(v)}" for k, v in report["executor_parameters"].items()]
    (out / "confidence_thresholds.yaml").write_text("\n".join(yaml_lines) + "\n")
    return report
