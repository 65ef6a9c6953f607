"""Operator-judged evaluation on a robot (``para-eval-robot``), the ROS-free part: the variants, the balanced order of
episodes, the operator's commands and what they may do when, the report and what ``--continue`` keeps.

On a robot nothing judges an episode but the person beside it. Each episode: the arm is held (the executor's
``stop``), the operator resets the scene and says "start", the policy has the arm until the operator marks the
episode (``success``, ``failure`` or ``void``, a reason with the last two) or the time limit passes (the arm is held
again and the operator is asked for the mark). A ``void`` episode (the scene was knocked, a cable caught, the operator
was not ready) is no attempt of the policy: it is listed and left out of every rate, like a simulator fault in
``para-sim eval``.

Order: with several variants each *round* runs every variant once; ``abba`` alternates the round's order (A B, B A,
A B, ...: for two variants the classic ABBA), so a slow drift of the scene (a cube wearing, the light changing, the
operator tiring) falls on every variant alike; ``random`` shuffles each round with ``order_seed`` (the order is in
the report). Either way the first N episodes of a longer run are the N episodes of a shorter one, so ``--continue``
extends an interrupted run with the order it would have had. The episodes of one round are the pairs of the paired
test (exact McNemar, :func:`para_ros.deploy.paired_stats.paired_outcomes` keyed on ``round``).

Operator commands (:func:`parse_operator_text`): from the keyboard (the running episode implied) ``start`` (or an
empty line), ``s`` / ``success [REASON]``, ``f`` / ``failure REASON``, ``v`` / ``void REASON``; on the ROS topics
(the episode named, so that a late or stray message cannot mark another episode) ``~/start``: ``EPISODE`` and
``~/mark``: ``EPISODE success|failure|void [REASON]``. :class:`OperatorDesk` accepts a command only in the phase it
belongs to and says why it refused one.
"""

from __future__ import annotations

import json
import math
import random
import re
import threading
import time
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

from para_ros.deploy.paired_stats import paired_outcomes
from para_ros.sim.pick_place import wilson_interval

MARKS = ("success", "failure", "void")
ORDERS = ("abba", "random")
LABEL_RE = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")
REPORT = "report.json"


@dataclass(frozen=True)
class Variant:
    """One policy under test: a label (the report's column), a checkpoint directory, and inference node parameters
    on top of the run's (``decoding``, ``fusion_tau_s``, ...). The inference node is started with exactly these
    for this variant's episodes."""

    label: str
    checkpoint: str
    inference_params: dict = field(default_factory=dict)


def parse_variant(text: str) -> Variant:
    """``LABEL=CHECKPOINT_DIR[,inference_node:PARAM:=VALUE...]`` -> a :class:`Variant` (the checkpoint made absolute,
    the parameters checked against the inference node's table). ValueError naming the problem and the fix."""
    from para_ros.deploy.graph import parse_node_params  # pyyaml and the parameter tables: on first use
    from para_ros.nodes.parameter_registry import check_node_params

    label, sep, rest = text.partition("=")
    parts = [p.strip() for p in rest.split(",")]
    if not sep or not LABEL_RE.match(label.strip()) or not parts[0]:
        raise ValueError(
            f"--variant {text!r}: write LABEL=CHECKPOINT_DIR[,inference_node:PARAM:=VALUE...], the label of "
            "letters, digits, '_', '.', '-' (up to 32), e.g. A=checkpoints/pick_place"
        )
    params = parse_node_params(parts[1:]) if len(parts) > 1 else {}
    others = sorted(set(params) - {"inference_node"})
    if others:
        raise ValueError(
            f"--variant {text!r}: a variant sets inference_node parameters only (that node is restarted for each "
            f"variant); {', '.join(others)} parameters go to every variant alike with --node-param"
        )
    inference = check_node_params(params).get("inference_node", {}) if params else {}
    if "checkpoint" in inference:
        raise ValueError(f"--variant {text!r}: the checkpoint is the part after '=', not a parameter")
    return Variant(label.strip(), str(check_checkpoint_dir(parts[0])), inference)


def check_checkpoint_dir(path: str) -> Path:
    """``path`` made absolute after checking that it holds a checkpoint the inference node can load (``config.json``
    with a model config, ``model.safetensors``). ValueError naming what is missing."""
    from para_core.model.config import V4Config  # torch-free, but the model package: on first use

    p = Path(path).expanduser().resolve()
    if not p.is_dir():
        raise ValueError(
            f"checkpoint {path!r}: no such directory (give a para-train RUN/checkpoint or checkpoints/NAME)"
        )
    for name in ("config.json", "model.safetensors"):
        if not (p / name).is_file():
            raise ValueError(f"checkpoint {path!r}: {name} is missing: not a checkpoint directory")
    try:
        V4Config.from_dict(json.loads((p / "config.json").read_text())["config"])
    except (KeyError, ValueError, TypeError) as exc:
        raise ValueError(f"checkpoint {path!r}: config.json holds no model config the node can load ({exc})") from exc
    return p


def balanced_order(n_variants: int, episodes: int, order: str = "abba", order_seed: int = 0) -> list[int]:
    """The variant index of each of ``episodes`` episodes: rounds of every variant once, ``abba`` reversing every
    other round, ``random`` shuffling each round with a generator seeded by (``order_seed``, round). The first N
    entries do not depend on ``episodes`` (a continued run keeps its order)."""
    if order not in ORDERS:
        raise ValueError(f"order {order!r}: use one of {', '.join(ORDERS)}")
    if n_variants < 1 or episodes < 0:
        raise ValueError(f"need at least one variant and episodes >= 0 (got {n_variants}, {episodes})")
    out: list[int] = []
    r = 0
    while len(out) < episodes:
        block = list(range(n_variants))
        if order == "abba" and r % 2 == 1:
            block.reverse()
        elif order == "random":
            random.Random(f"{order_seed}:{r}").shuffle(block)
        out.extend(block)
        r += 1
    return out[:episodes]


@dataclass
class RobotEvalSettings:
    """What ``para-eval-robot`` runs; every field is checked here, with an error naming it and the fix.

    Args:
        variants: the policies under test (:class:`Variant`, as dicts once read back from a report).
        episodes: episodes in all (every variant's share: episodes / variants, rounded as the order falls).
        order: ``abba`` or ``random`` (module docstring).
        order_seed: seeds the generator of the ``random`` order.
        time_limit_s: seconds from the hand-over to the policy until the arm is held and a mark is asked for.
        settle_s: seconds between the operator's "start" and the hand-over (the inference node's end-effector
            history then holds only the new scene).
        backend: the robot (``sim``, ``i2rt``, ``topic``: ``para-deploy --robot``, ``para-eval-robot --robot``).
        node_params: parameters of any node for every variant ({node: {name: value}}).
        calibration: a ``calibration.yaml`` (``para-calib solve``) for the rig's cameras, as ``para-deploy
            --calibration``; "" = none.
        device: the inference node's torch device (``auto``, ``cpu``, ``cuda``, ``cuda:N``); "" = config's.
        record: write one rosbag2 recording per episode (``OUT/episodes/NNN``).
        out: the evaluation's folder.
        resume: ``--continue``: keep the episodes of the report in ``out`` and run the rest.
    """

    variants: list
    episodes: int = 20
    order: str = "abba"
    order_seed: int = 0
    time_limit_s: float = 60.0
    settle_s: float = 1.0
    backend: str = "sim"
    node_params: dict = field(default_factory=dict)
    calibration: str = ""
    device: str = ""
    record: bool = True
    out: str = ""
    resume: bool = False

    def __post_init__(self):
        from para_ros.deploy.graph import BACKENDS  # the graph's names: on first use
        from para_ros.nodes.parameter_registry import check_node_params

        self.variants = [v if isinstance(v, Variant) else Variant(**v) for v in self.variants]
        if not self.variants:
            raise ValueError("give at least one --variant LABEL=CHECKPOINT_DIR")
        labels = [v.label for v in self.variants]
        if len(set(labels)) != len(labels):
            raise ValueError(f"--variant labels repeat ({', '.join(labels)}): give each variant its own label")
        if not 1 <= int(self.episodes) <= 10000:
            raise ValueError(f"--episodes {self.episodes}: use 1..10000")
        if self.order not in ORDERS:
            raise ValueError(f"--order {self.order!r}: use one of {', '.join(ORDERS)}")
        if not 1.0 <= float(self.time_limit_s) <= 3600.0:
            raise ValueError(f"--time-limit {self.time_limit_s}: use 1..3600 s")
        if not 0.0 <= float(self.settle_s) <= 60.0:
            raise ValueError(f"--settle {self.settle_s}: use 0..60 s")
        if self.backend not in BACKENDS:
            raise ValueError(f"--robot {self.backend!r}: use one of {', '.join(BACKENDS)}")
        self.node_params = check_node_params(self.node_params)
        if "checkpoint" in self.node_params.get("inference_node", {}):
            raise ValueError("--node-param inference_node:checkpoint: the checkpoints are the variants' (--variant)")
        if self.calibration:
            if not Path(self.calibration).is_file():
                raise ValueError(f"--calibration {self.calibration!r}: no such file (para-calib solve writes one)")
            self.calibration = str(Path(self.calibration).resolve())
        if not self.out:
            raise ValueError("--out is needed: the folder of the report (and of --continue)")

    def plan(self) -> list[int]:
        """The variant index of every episode, in run order."""
        return balanced_order(len(self.variants), self.episodes, self.order, self.order_seed)

    def to_json(self) -> dict:
        return json.loads(json.dumps(asdict(self)))


# Settings a continued evaluation may change: how many episodes, where it writes, whether it records.
CONTINUE_MAY_CHANGE = ("episodes", "out", "resume", "record")


@dataclass
class MarkRow:
    """One judged episode.

    ``round``: the round it belongs to (its pair in the paired test); ``duration_s``: wall seconds from the
    hand-over to the mark or to the time limit; ``time_limit_hit``: the limit came before the mark; ``wall_s``: wall
    seconds from the reset prompt to the mark; ``marked_by``: ``keyboard`` or ``topic``."""

    episode: int
    round: int
    variant: str
    outcome: str
    reason: str
    duration_s: float
    time_limit_hit: bool
    wall_s: float
    marked_by: str
    recording: str = ""
    started_at: str = ""  # ISO time of the hand-over, UTC


def summarise_marks(rows: list[MarkRow]) -> dict:
    """Success rate with its 95 % Wilson interval over the judged episodes (``void`` left out, counted under
    ``voids``), the failure reasons with their counts, and the median episode times."""
    judged = [r for r in rows if r.outcome != "void"]
    n, ok = len(judged), sum(r.outcome == "success" for r in judged)
    lo, hi = wilson_interval(ok, n)
    reasons: dict[str, int] = {}
    for r in judged:
        if r.outcome == "failure":
            reasons[r.reason] = reasons.get(r.reason, 0) + 1
    success_times = [r.duration_s for r in judged if r.outcome == "success"]
    return {
        "episodes": n,
        "voids": len(rows) - n,
        "successes": ok,
        "success_rate": ok / n if n else 0.0,
        "wilson95": [lo, hi],
        "outcomes": {m: sum(r.outcome == m for r in rows) for m in MARKS},
        "failure_reasons": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
        "median_success_time_s": float(np.median(success_times)) if success_times else None,
        "median_episode_time_s": float(np.median([r.duration_s for r in judged])) if judged else None,
    }


def write_report(out: Path, settings: RobotEvalSettings, rows: list[MarkRow], extra: dict) -> dict:
    """``report.json`` and ``report.md`` in ``out`` (rewritten after every episode): per variant the success rate with
    its Wilson interval, outcome counts and failure reasons; per pair of variants the paired table on the rounds both
    finished with the exact McNemar p-value; every episode. Returns the summaries and pairs."""
    labels = [v.label for v in settings.variants]
    by_variant = {lab: [r for r in rows if r.variant == lab] for lab in labels}
    summaries = {lab: summarise_marks(by_variant[lab]) for lab in labels}
    pairs = []
    for i in range(len(labels)):
        for j in range(i + 1, len(labels)):
            a = [r for r in by_variant[labels[i]] if r.outcome != "void"]
            b = [r for r in by_variant[labels[j]] if r.outcome != "void"]
            pairs.append({"a": labels[i], "b": labels[j], **paired_outcomes(a, b, key="round")})
    order = [labels[v] for v in settings.plan()]
    report = {
        "settings": settings.to_json(),
        "order": order,
        "summaries": summaries,
        "pairs": pairs,
        "episodes": [asdict(r) for r in rows],
        **extra,
    }
    tmp = out / (REPORT + ".tmp")
    tmp.write_text(json.dumps(report, indent=2))
    tmp.replace(out / REPORT)  # a stop in the middle of the write leaves the last whole report
    lines = [
        f"# para-eval-robot: {' vs '.join(labels)} on backend {settings.backend}",
        "",
        f"- {len(rows)} of {settings.episodes} episodes judged by the operator; order {settings.order}"
        + (f" (seed {settings.order_seed})" if settings.order == "random" else "")
        + ": "
        + " ".join(order),
        f"- time limit {settings.time_limit_s:g} s from the hand-over; void episodes are listed and left out of "
        "every rate",
        *(
            f"- {v.label}: {v.checkpoint}"
            + ("".join(f", {k}={val!r}" for k, val in v.inference_params.items()) if v.inference_params else "")
            for v in settings.variants
        ),
        "- node parameters for every variant beyond config/*.yaml: "
        + (
            "; ".join(f"{nd} {k}={val!r}" for nd, values in settings.node_params.items() for k, val in values.items())
            or "none"
        ),
        "",
        "| variant | episodes | successes | success rate | 95 % Wilson interval | failure | void | "
        "median time to success s | failure reasons |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for lab in labels:
        s = summaries[lab]
        lo, hi = s["wilson95"]
        med = s["median_success_time_s"]
        lines.append(
            f"| {lab} | {s['episodes']} | {s['successes']} | {100 * s['success_rate']:.1f} % | "
            f"{100 * lo:.1f}..{100 * hi:.1f} % | {s['outcomes']['failure']} | {s['voids']} | "
            f"{'' if med is None else f'{med:.1f}'} | "
            + "; ".join(f"{reason} ({n})" for reason, n in s["failure_reasons"].items())
            + " |"
        )
    if pairs:
        lines += [
            "",
            "Paired comparison on the rounds both variants finished (exact McNemar test on the discordant rounds):",
            "",
            "| A | B | rounds | both succeed | A only | B only | neither | A - B | p (two-sided) |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for p in pairs:
            lines.append(
                f"| {p['a']} | {p['b']} | {p['seeds']} | {p['both']} | {p['a_only']} | {p['b_only']} | "
                f"{p['neither']} | {100 * p['difference']:+.1f} pts | {p['mcnemar_p']:.3g} |"
            )
    lines += [
        "",
        "| episode | round | variant | outcome | reason | time s | time limit hit | wall s | marked by | recording |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.episode} | {r.round} | {r.variant} | {r.outcome} | {r.reason} | {r.duration_s:.1f} | "
        f"{'yes' if r.time_limit_hit else 'no'} | {r.wall_s:.1f} | {r.marked_by} | {r.recording} |"
        for r in rows
    ]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return {"summaries": summaries, "pairs": pairs}


def check_new_or_continued(out: Path, settings: RobotEvalSettings) -> list[MarkRow]:
    """The rows an evaluation into ``out`` starts from: none for a new one (refused when ``out`` already holds an
    evaluation, so nothing is overwritten), the earlier report's episodes for ``--continue`` (refused when that
    report was run with other settings, naming them). ValueError with the fix otherwise."""
    path = out / REPORT
    if not settings.resume:
        if path.exists() or (out / "episodes").exists():
            raise ValueError(
                f"{out} holds an evaluation already ({path.name} or episodes/): add --continue to resume it, or "
                "choose another --out; nothing was changed"
            )
        return []
    if not path.is_file():
        raise ValueError(f"--continue: {path} does not exist: nothing to continue (drop --continue to start)")
    report = json.loads(path.read_text())
    now = settings.to_json()
    defaults = {  # a setting the report lacks (written before it existed) had its default
        f.name: f.default if f.default is not MISSING else f.default_factory()
        for f in fields(RobotEvalSettings)
        if f.default is not MISSING or f.default_factory is not MISSING
    }
    before = {**json.loads(json.dumps(defaults)), **(report.get("settings") or {})}
    differ = [k for k in now if k not in CONTINUE_MAY_CHANGE and before.get(k) != now[k]]
    if differ:
        raise ValueError(
            "--continue: the report in "
            f"{out} was run with other settings ("
            + "; ".join(f"{k}: {before.get(k)!r} there, {now[k]!r} now" for k in differ)
            + "); use the same settings or another --out"
        )
    rows = [MarkRow(**r) for r in report.get("episodes") or []]
    beyond = [r.episode for r in rows if r.episode >= settings.episodes]
    if beyond:
        raise ValueError(
            f"--continue --episodes {settings.episodes}: the report in {out} holds episode(s) up to {max(beyond)}; "
            f"give --episodes {max(beyond) + 1} or more (nothing is dropped from a report)"
        )
    return rows


# ------------------------------------------------------------------------------------------- operator commands
@dataclass(frozen=True)
class OperatorCommand:
    """``kind``: ``start`` or ``mark``; ``episode``: the episode named (None: the running one, from the keyboard);
    ``outcome`` and ``reason`` of a mark; ``source``: ``keyboard`` or ``topic``."""

    kind: str
    episode: int | None = None
    outcome: str = ""
    reason: str = ""
    source: str = "keyboard"


_SHORT = {"s": "success", "f": "failure", "v": "void"}


def parse_operator_text(text: str, source: str = "keyboard", topic: str = "") -> OperatorCommand:
    """One operator line -> an :class:`OperatorCommand` (module docstring for the forms). ``source`` ``keyboard``
    implies the running episode; ``topic`` (``start`` or ``mark``) needs the episode number first. ValueError
    saying the accepted forms."""
    text = text.strip()
    words = text.split()
    if source == "topic":
        if not words or not words[0].isdigit():
            form = "EPISODE" if topic == "start" else "EPISODE success|failure|void [REASON]"
            raise ValueError(f"~/{topic} {text!r}: write {form}")
        episode, words = int(words[0]), words[1:]
        if topic == "start":
            if words:
                raise ValueError(f"~/start {text!r}: write the episode number only")
            return OperatorCommand("start", episode, source=source)
    else:
        episode = None
        if not words or words[0].lower() in ("start", "go"):
            return OperatorCommand("start", None, source=source)
    head = words[0].lower() if words else ""
    outcome = _SHORT.get(head, head)
    reason = " ".join(words[1:])
    if outcome not in MARKS:
        raise ValueError(
            f"{text!r}: mark with success [REASON] (s), failure REASON (f) or void REASON (v)"
            + ("; Enter or 'start' starts an episode" if source == "keyboard" else "")
        )
    if outcome != "success" and not reason:
        raise ValueError(f"{text!r}: a {outcome} needs a reason, e.g. '{outcome} dropped the cube'")
    return OperatorCommand("mark", episode, outcome, reason, source)


class OperatorDesk:
    """Where the evaluation stands and which operator command it takes now (thread-safe; one writer: the evaluation
    loop calls :meth:`open`; commands come from the keyboard and topic threads through :meth:`offer`).

    Phases: ``idle`` (between episodes: nothing accepted), ``reset`` (episode k: waiting for "start"), ``running``
    (episode k: a mark ends it), ``judging`` (episode k past its time limit, the arm held: waiting for the mark)."""

    def __init__(self):
        self._cond = threading.Condition()
        self.phase = "idle"
        self.episode: int | None = None
        self._taken: OperatorCommand | None = None

    def open(self, phase: str, episode: int | None) -> None:
        """Enter ``phase`` for ``episode`` (the evaluation loop only); forgets any command not yet taken."""
        with self._cond:
            self.phase, self.episode, self._taken = phase, episode, None
            self._cond.notify_all()

    def offer(self, cmd: OperatorCommand) -> tuple[bool, str]:
        """Accept ``cmd`` if it belongs to the current phase and episode; (accepted, what happened or why not)."""
        with self._cond:
            phase, k = self.phase, self.episode
            if cmd.episode is not None and cmd.episode != k:
                now = f"episode {k} is {phase}" if k is not None else "no episode is open"
                return False, f"refused: episode {cmd.episode} is not running ({now})"
            wants = {"reset": "start", "running": "mark", "judging": "mark"}.get(phase)
            if wants != cmd.kind:
                return False, (
                    f"refused: {cmd.kind} while episode {k} is {phase}"
                    if k is not None
                    else f"refused: {cmd.kind}: no episode is open"
                )
            if self._taken is not None:
                return False, f"refused: episode {k} has its {self._taken.kind} already"
            self._taken = cmd
            self._cond.notify_all()
            what = (
                "started"
                if cmd.kind == "start"
                else f"marked {cmd.outcome}" + (f" ({cmd.reason})" if cmd.reason else "")
            )
            return True, f"episode {k} {what}"

    def wait(self, timeout_s: float | None, stop: threading.Event) -> OperatorCommand | None:
        """The command accepted in the current phase, waiting up to ``timeout_s`` (None: until one comes) or until
        ``stop`` is set; None when none came."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            while self._taken is None and not stop.is_set():
                left = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
                if left <= 0:
                    break
                self._cond.wait(left)
            return self._taken


def round_of(episode: int, n_variants: int) -> int:
    """The round (pair) an episode belongs to: every variant runs once per round."""
    return episode // n_variants


def fmt_rate(summary: dict) -> str:
    """``k/n (rate %, Wilson interval %)`` of a :func:`summarise_marks` summary, for the progress lines."""
    lo, hi = summary["wilson95"]
    return f"{summary['successes']}/{summary['episodes']}" + (
        f" ({100 * summary['success_rate']:.0f} %, {100 * lo:.0f}..{100 * hi:.0f} %)"
        if summary["episodes"] and math.isfinite(lo)
        else ""
    )
