"""The suite behind ``para-sim suite``: a checkpoint evaluated at the nominal rig and at each way a real rig differs
from the one it was trained on, in lockstep, into one table and one plot (:func:`run_suite` of a
:class:`SuiteSettings`; the command's options: ``para_ros.commands.sim_suite``).

Each condition is one :func:`para_ros.deploy.closed_loop.run_eval` over the same layout seeds with the graph changed
in one way (a camera moved, a mount or a calibration wrong, another colour, light or clutter); its report lands in
``OUT/<checkpoint label>/<condition>/report.json`` and is continued, not rerun, by the same command (``--continue``
rules of ``para-sim eval``). The conditions, in a rig builder's words:

* ``orbit-25`` / ``orbit+25``: the scene camera turned about the workspace's vertical axis; ``raised10cm`` /
  ``lowered10cm``: moved up / down, still aimed at the workspace. TF tells the truth.
* ``wrist_mount_3mm_3deg``: the wrist camera sits 3 mm and 3 deg from the CAD mount the graph is told.
* ``focal+5pct``: the scene camera's focal length 5 % longer than the training camera's (CameraInfo tells it).
* ``told_extrinsics_10mm`` / ``told_extrinsics_1deg``: the scene camera sits 10 mm / 1 deg from where the graph is
  told (a hand-eye calibration that far off).
* ``grey_cube``, ``dark_pad``: a cube / pad colour outside the default training ranges of ``--randomise-rig``
  (saturation below 0.55, value below 0.45); ``dim_light`` / ``bright_light``: lamps at 0.4 / 1.8 of the training
  scene's (range 0.6-1.4); ``distractors4``: four distractors where training had at most two.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from para_ros.sim.camera_sampler import CameraMove, NominalCamera, camera_pose
from para_ros.sim.pick_place import wilson_interval


@dataclass(frozen=True)
class Condition:
    """One way the rig differs: a scene camera move (TF tells it) and/or ``sim_node`` parameters."""

    description: str
    move: CameraMove | None = None
    sim_params: dict = field(default_factory=dict)


def _fovy_for_focal_factor(fovy_deg: float, factor: float) -> float:
    """Vertical field of view of a camera whose focal length is ``factor`` x that of one with ``fovy_deg``."""
    return math.degrees(2.0 * math.atan(math.tan(math.radians(fovy_deg) / 2.0) / factor))


CONDITIONS: dict[str, Condition] = {
    "nominal": Condition("the training rig"),
    "orbit-25": Condition("scene camera orbited -25 deg", move=CameraMove(orbit_deg=-25.0)),
    "orbit+25": Condition("scene camera orbited +25 deg", move=CameraMove(orbit_deg=25.0)),
    "raised10cm": Condition("scene camera raised 10 cm", move=CameraMove(height_m=0.10)),
    "lowered10cm": Condition("scene camera lowered 10 cm", move=CameraMove(height_m=-0.10)),
    "wrist_mount_3mm_3deg": Condition(
        "wrist camera 3 mm and 3 deg off the told mount",
        sim_params={"wrist_cam_true_offset_xyz_m": [0.003, 0.0, 0.0], "wrist_cam_true_offset_rpy_deg": [0.0, 3.0, 0.0]},
    ),
    "focal+5pct": Condition(
        "scene camera focal length +5 %",
        sim_params={"scene_cam_fovy_deg": round(_fovy_for_focal_factor(38.0, 1.05), 4)},
    ),
    "told_extrinsics_10mm": Condition(
        "scene camera 10 mm from its told pose", sim_params={"scene_cam_true_offset_xyz_m": [0.01, 0.0, 0.0]}
    ),
    "told_extrinsics_1deg": Condition(
        "scene camera 1 deg from its told pose", sim_params={"scene_cam_true_offset_rpy_deg": [1.0, 0.0, 0.0]}
    ),
    "grey_cube": Condition("light grey cube (unseen colour)", sim_params={"cube_rgba": [0.75, 0.75, 0.75, 1.0]}),
    "dark_pad": Condition("dark grey target pad (unseen colour)", sim_params={"target_rgba": [0.2, 0.2, 0.2, 1.0]}),
    "dim_light": Condition("lamps at 0.4 of the training scene", sim_params={"light_scale": 0.4}),
    "bright_light": Condition("lamps at 1.8 of the training scene", sim_params={"light_scale": 1.8}),
    "distractors4": Condition("four distractor objects on the table", sim_params={"n_distractors": 4}),
}


def select_conditions(names: list[str] | None) -> list[str]:
    """The conditions to run, in table order; ``names`` None or empty = all.

    :raises ValueError: naming an unknown condition and the known ones.
    """
    if not names:
        return list(CONDITIONS)
    unknown = [n for n in names if n not in CONDITIONS]
    if unknown:
        raise ValueError(f"unknown condition(s) {unknown}; known: {', '.join(CONDITIONS)}")
    return [n for n in CONDITIONS if n in names]


def condition_settings(base, name: str, nominal: NominalCamera | None = None):
    """``base`` (an ``EvalSettings``) changed into condition ``name``: camera shift / rotation and node parameters."""
    from para_ros.deploy.sweep import shift_and_rotation

    cond = CONDITIONS[name]
    nominal = nominal or NominalCamera.from_sim_config()
    shift, rot = (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
    if cond.move is not None:
        T_nominal = camera_pose(CameraMove(), nominal)[0]
        shift, rot = shift_and_rotation(T_nominal, camera_pose(cond.move, nominal)[0])
    params = {k: dict(v) for k, v in base.node_params.items()}
    if cond.sim_params:
        params["sim_node"] = {**params.get("sim_node", {}), **cond.sim_params}
    return replace(base, camera_shift_m=tuple(shift), camera_rotate_deg=tuple(rot), node_params=params)


def read_summary(report: Path) -> dict | None:
    """The summary of a finished report (None when absent)."""
    if not report.is_file():
        return None
    return json.loads(report.read_text()).get("summary")


def table_rows(out: Path, labels: list[str], names: list[str]) -> list[dict]:
    """One row per (checkpoint, condition) with successes, episodes, rate and its 95 % Wilson interval."""
    rows = []
    for label in labels:
        for name in names:
            s = read_summary(out / label / name / "report.json")
            row = {"checkpoint": label, "condition": name, "description": CONDITIONS[name].description}
            if s and int(s["episodes"]) > 0:  # a report of no episode (a graph that never answered): not run
                k, n = int(s["successes"]), int(s["episodes"])
                lo, hi = wilson_interval(k, n) if n else (0.0, 1.0)
                row.update(successes=k, episodes=n, rate=k / n if n else None, interval=[lo, hi])
            rows.append(row)
    return rows


def write_table(out: Path, labels: list[str], names: list[str], settings_record: dict) -> Path:
    """``suite.json`` and ``suite.md`` (conditions as rows, checkpoints as columns); returns the markdown path."""
    rows = table_rows(out, labels, names)
    (out / "suite.json").write_text(json.dumps({"settings": settings_record, "rows": rows}, indent=2))
    cell = {(r["checkpoint"], r["condition"]): r for r in rows}
    lines = ["| condition | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for name in names:
        cells = []
        for label in labels:
            r = cell[(label, name)]
            if "episodes" not in r:
                cells.append("not run")
            else:
                lo, hi = r["interval"]
                cells.append(
                    f"{r['successes']}/{r['episodes']} ({100 * r['rate']:.0f} %, {100 * lo:.0f}-{100 * hi:.0f})"
                )
        lines.append(f"| {name}: {CONDITIONS[name].description} | " + " | ".join(cells) + " |")
    md = out / "suite.md"
    md.write_text("\n".join(lines) + "\n")
    return md


def plot_suite(out: Path, labels: list[str], names: list[str]) -> Path | None:
    """``suite.png``: success rate per condition, one bar per checkpoint, with 95 % Wilson intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = {(r["checkpoint"], r["condition"]): r for r in table_rows(out, labels, names)}
    if not any("episodes" in r for r in rows.values()):
        return None
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(names) + 2), 4.0))
    width = 0.8 / max(1, len(labels))
    x = np.arange(len(names))
    for i, label in enumerate(labels):
        rates, errs = [], [[], []]
        for name in names:
            r = rows[(label, name)]
            rate = r.get("rate")
            rates.append(np.nan if rate is None else 100 * rate)
            lo, hi = r.get("interval", [np.nan, np.nan]) if rate is not None else (np.nan, np.nan)
            errs[0].append(0 if rate is None else 100 * (rate - lo))
            errs[1].append(0 if rate is None else 100 * (hi - rate))
        ax.bar(x + (i - (len(labels) - 1) / 2) * width, rates, width, yerr=errs, capsize=2, label=label)
    ax.set_xticks(x, names, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("success rate (%), 95 % Wilson interval")
    ax.set_ylim(0, 105)
    ax.axhline(90, color="grey", lw=0.6, ls="--")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # beside the bars, never over one
    fig.tight_layout()
    path = out / "suite.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


@dataclass(frozen=True)
class SuiteSettings:
    """One suite: the checkpoints as (label, directory) pairs with distinct labels, the conditions by name (empty:
    all, in table order), the evaluation of each (episodes from layout seed ``seed``, the user's node parameters
    ``{node: {name: value}}``, the simulated camera -> chunk latency in lockstep, which a ``chunk_executor``
    ``lockstep_latency_s`` node parameter overrides) and what to do: run what the reports in ``out`` lack, only join
    them (``report_only``), or only list the conditions (``dry_run``)."""

    checkpoints: tuple[tuple[str, str], ...]
    out: str
    conditions: tuple[str, ...] = ()
    episodes: int = 30
    seed: int = 100000
    node_params: dict = field(default_factory=dict)
    time_limit_s: float = 30.0
    latency_s: float = 0.2
    device: str = ""
    lockstep: bool = True
    report_only: bool = False
    dry_run: bool = False
    jobs: int = 1
    print_commands: bool = False


def run_suite(settings: SuiteSettings) -> int:
    """Check the settings before anything runs (2, said on stderr, for a bad one), then evaluate every checkpoint
    under every condition (continuing the reports already in ``out``) and write ``suite.json``, ``suite.md`` and
    ``suite.png``. The exit status: 0, the first failing evaluation's, ``INTERRUPTED_RC`` when stopped by a signal."""
    from para_ros.deploy.closed_loop import EvalSettings, check_checkpoint_matches_sim, finished_summary, run_eval
    from para_ros.deploy.graph_run import INTERRUPTED_RC

    checkpoints = list(settings.checkpoints)
    try:
        names = select_conditions(list(settings.conditions))
        if not checkpoints:
            raise ValueError("no checkpoint to evaluate")
        if not 1 <= settings.episodes <= 10000:
            raise ValueError(f"--episodes {settings.episodes} must be within 1..10000")
        if not settings.report_only:
            for _, path in checkpoints:
                check_checkpoint_matches_sim(path)
        if not 0.0 <= settings.latency_s <= 2.0:
            raise ValueError(f"--latency-s {settings.latency_s} must be within 0..2 s")
        if not settings.report_only:
            from para_ros.deploy.parallel_eval import check_jobs

            check_jobs(settings.jobs, settings.lockstep, here=not settings.print_commands)
        node_params = {node: dict(params) for node, params in settings.node_params.items()}
        if settings.lockstep:
            executor = node_params.setdefault("chunk_executor", {})
            executor.setdefault("lockstep_latency_s", float(settings.latency_s))
        base = EvalSettings(
            checkpoint=checkpoints[0][1],
            episodes=settings.episodes,
            seed=settings.seed,
            time_limit_s=settings.time_limit_s,
            node_params=node_params,
            lockstep=settings.lockstep,
            device=settings.device,
            videos=False,
        )
        plans = {name: condition_settings(base, name) for name in names}
    except ValueError as exc:
        print(f"para-sim suite: {exc}", file=sys.stderr)
        return 2
    labels = [label for label, _ in checkpoints]
    print(f"para-sim suite: {len(names)} condition(s) x {len(labels)} checkpoint(s) x {settings.episodes} episodes")
    for name in names:
        print(f"  {name:22s} {CONDITIONS[name].description}")
    if settings.dry_run:
        return 0
    out = Path(settings.out)
    out.mkdir(parents=True, exist_ok=True)
    record = {
        "episodes": settings.episodes,
        "seed": settings.seed,
        "lockstep": settings.lockstep,
        "checkpoints": dict(checkpoints),
    }
    rc = 0
    if not settings.report_only and (settings.jobs > 1 or settings.print_commands):
        from para_ros.deploy.parallel_eval import run_evaluations

        runs = [
            replace(plans[name], checkpoint=path, out=str(out / label / name), resume=True)
            for label, path in checkpoints
            for name in names
            if finished_summary(out / label / name / "report.json", settings.episodes) is None
        ]
        rc = run_evaluations(runs, settings.jobs, settings.print_commands, settings.lockstep, "para-sim suite", out)
        if rc == 2 or settings.print_commands:
            return rc
    elif not settings.report_only:
        for label, path in checkpoints:
            for name in names:
                run = replace(plans[name], checkpoint=path, out=str(out / label / name), resume=True)
                print(f"[{label} / {name}] {CONDITIONS[name].description}", flush=True)
                code = run_eval(run)
                write_table(out, labels, names, record)
                if code == INTERRUPTED_RC:
                    print("para-sim suite: interrupted; the same command continues where it stopped", file=sys.stderr)
                    return code
                rc = rc or code
    md = write_table(out, labels, names, record)
    plot = plot_suite(out, labels, names)
    print(md.read_text())
    print(f"para-sim suite: table {md} (and suite.json), plot {plot}")
    return rc
