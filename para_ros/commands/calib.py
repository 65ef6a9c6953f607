"""``para-calib``: hand-eye calibration of the scene and wrist cameras with a ChArUco board.

Subcommands:

* ``board``: write the board as PNG and PDF at true scale, for printing (print at 100 %, then measure a square).
* ``capture``: drive the arm through calibration poses (or record while you move it: ``--manual``) and record, at
  each settled pose, images, CameraInfo, joint states and TF as a rosbag2 recording
  (:mod:`para_ros.deploy.calibration_capture`). ``--dry-run`` lists the poses.
* ``solve``: read a recording where the board is visible, solve ``scene_cam`` (eye-to-hand, board on the flange)
  and/or ``wrist_cam`` (eye-in-hand, board on the table), print per-sample and overall figures and write
  ``calibration.yaml`` (never over an existing file without ``--force``) plus an overlay PNG per camera.
* ``refine``: re-estimate the scene camera's pose from a recording of normal operation (no board): the ArUco marker
  on the gripper against the arm's kinematics (:mod:`para_ros.calibration.refine`); a recording where the arm hardly
  moves is refused with its coverage figures, and nothing is written.

Then ``para-bag calib`` checks a recording against TF, and ``para-deploy --calibration FILE`` /
``deploy.launch.py calibration:=FILE`` deploy with the file.

Exit status: 0 done; 1 the capture stopped (the arm is held) or the solve failed (nothing written); 2 bad arguments;
130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import yaml

from para_core.calibration.board import CharucoBoardSpec
from para_core.calibration.errors import CalibrationError
from para_core.calibration.marker import ArucoMarkerSpec
from para_core.calibration.marker_refine import RefineConfig
from para_ros.bag.reader import BagError
from para_ros.calibration.refine import refine_recording
from para_ros.calibration.solve import describe, solve_camera, write_outputs
from para_ros.deploy import graph
from para_ros.deploy.calibration_capture import CaptureAborted, CaptureSettings, run_capture
from para_ros.deploy.graph_run import GraphRun
from para_ros.nodes.command_backends import ROBOTS
from para_ros.nodes.parameter_registry import check_node_params
from para_ros.sim.calibration_board import offset_T
from para_ros.sim.calibration_marker import default_T_gripper_marker

CAMERAS = ("scene_cam", "wrist_cam")


def _add_board_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("board (as printed: measure it)")
    g.add_argument("--squares-x", type=int, default=5, help="squares along the board's x (default 5)")
    g.add_argument("--squares-y", type=int, default=7, help="squares along the board's y (default 7)")
    g.add_argument("--square-m", type=float, default=0.03, help="square side in metres (default 0.03)")
    g.add_argument("--marker-m", type=float, default=0.022, help="marker side in metres (default 0.022)")
    g.add_argument("--dictionary", default="DICT_5X5_100", help="OpenCV ArUco dictionary (default DICT_5X5_100)")


def _add_marker_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("marker on the gripper (as stuck: measure it)")
    g.add_argument("--marker-side-m", type=float, default=0.05, help="black square side in metres (default 0.05)")
    g.add_argument("--marker-id", type=int, default=0, help="marker id (default 0)")
    g.add_argument("--marker-dictionary", default="DICT_4X4_50", help="ArUco dictionary (default DICT_4X4_50)")
    g.add_argument(
        "--marker-xyz-m",
        default="",
        help="marker frame origin (its top-left outer corner) in gripper, x,y,z metres (default: the simulator's mount)",
    )
    g.add_argument(
        "--marker-rpy-deg",
        default="",
        help="marker frame orientation in gripper, roll,pitch,yaw degrees, z into the marker (default: the simulator's)",
    )


def _three_numbers(text: str, option: str) -> list[float] | None:
    if not text:
        return None
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if len(values) != 3:
        raise ValueError(f"{option} {text!r}: give three comma-separated numbers")
    return values


def board_spec(args):
    return CharucoBoardSpec(
        squares_x=args.squares_x,
        squares_y=args.squares_y,
        square_m=args.square_m,
        marker_m=args.marker_m,
        dictionary=args.dictionary,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="para-calib",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run `para-calib <subcommand> --help` for its options.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    b = sub.add_parser("board", help="write the board PNG + PDF at true scale")
    _add_board_options(b)
    b.add_argument("--out", default="charuco_board", help="output path without suffix (writes .png and .pdf)")
    b.add_argument("--dpi", type=float, default=300.0, help="PNG resolution, dots per inch (default 300)")
    b.add_argument("--page", default="A4", help="PDF page: A4 | letter | fit (default A4)")
    b.add_argument("--force", action="store_true", help="overwrite existing files")

    c = sub.add_parser(
        "capture",
        help="drive the arm through calibration poses and record a rosbag2 recording",
        description="Drive the arm through calibration poses (or record while you move it, --manual) "
        "and record images, CameraInfo, joint states and TF at each settled pose. The poses rotate "
        "about a point the camera sees (see para_ros/calibration/capture_poses.py) and are checked "
        "against every limit of config/yam.yaml; Ctrl-C or a sample timeout holds the arm at once.",
    )
    c.add_argument("--out", required=True, help="rosbag2 directory to write")
    _add_board_options(c)  # each sample is checked for this board (a warning when it is out of view)
    c.add_argument(
        "--camera",
        choices=CAMERAS,
        default="scene_cam",
        help="which camera the poses are for: scene_cam (board on the flange, default) or wrist_cam "
        "(board on the table)",
    )
    c.add_argument(
        "--robot",
        choices=tuple(ROBOTS),
        default="sim",
        help="the robot: sim: JointTrajectory to sim_node (gripper inside); topic: JointTrajectory of the 6 arm "
        "joints to a ros2_control controller; i2rt: the I2RT SDK on CAN (default sim). Each picks its command "
        "backend from para_ros/nodes/command_backends.py, as para-deploy's executor gets it",
    )
    c.add_argument(
        "--backend",
        choices=tuple(ROBOTS),
        default="",
        help="deprecated name of --robot (still accepted, with a warning)",
    )
    c.add_argument("--poses", type=int, default=12, help="number of candidate poses (default 12)")
    c.add_argument("--angle-deg", type=float, default=25.0, help="largest rotation about the pivot (default 25)")
    c.add_argument("--offset-m", type=float, default=0.03, help="largest shift of the pivot (default 0.03)")
    c.add_argument(
        "--centre",
        default="",
        help="centre pose: current (the arm where it is; default on a real "
        "arm), sim (the simulator's start pose; default with --robot sim), or one angle per arm joint "
        "in rad (the YAM: 6), comma-separated",
    )
    c.add_argument(
        "--pivot-m",
        default="",
        help="rotation pivot x,y,z in the flange frame (gripper), metres; "
        "default: scene_cam the simulator's flange board centre, wrist_cam 0.25 m along the wrist "
        "camera's axis",
    )
    c.add_argument("--speed-fraction", type=float, default=0.3, help="fraction of the speed limits (default 0.3)")
    c.add_argument("--settle-s", type=float, default=0.4, help="still this long before a sample (default 0.4)")
    c.add_argument("--settle-tol-rad", type=float, default=0.002, help="'still': joints move less (default 0.002)")
    c.add_argument(
        "--sample-timeout-s",
        type=float,
        default=15.0,
        help="hold and stop when a pose does not settle or the cameras do not deliver within this (default 15)",
    )
    c.add_argument("--scene-ns", default="/scene_cam", help="scene camera namespace (image_raw, camera_info)")
    c.add_argument("--wrist-ns", default="/wrist_cam", help="wrist camera namespace")
    c.add_argument("--joint-states-topic", default="/joint_states")
    c.add_argument(
        "--joint-trajectory-topic",
        default="/joint_trajectory",
        help="robots sim/topic: the trajectory topic (e.g. /arm_controller/joint_trajectory)",
    )
    c.add_argument(
        "--arm-joint-names",
        default="joint1,joint2,joint3,joint4,joint5,joint6",
        help="robot topic: the controller's 6 arm joint names",
    )
    c.add_argument("--can-channel", default="can0", help="robot i2rt: CAN interface")
    c.add_argument("--dry-run", action="store_true", help="list the poses (and the rejected ones), move nothing")
    c.add_argument(
        "--manual",
        action="store_true",
        help="record while you move the arm; a sample on Enter or "
        "when the arm was still for --still-s after moving; q + Enter ends",
    )
    c.add_argument("--samples", type=int, default=20, help="--manual: stop after this many samples (default 20)")
    c.add_argument("--still-s", type=float, default=1.0, help="--manual: still this long takes a sample")
    c.add_argument("--start-sim", action="store_true", help="start sim_node (config/sim.yaml) for the capture")
    c.add_argument(
        "--sim-param",
        action="append",
        default=[],
        metavar="NAME:=VALUE",
        help="with --start-sim: a sim_node parameter (YAML value), e.g. calibration_board:=flange; repeatable",
    )
    c.add_argument("--force", action="store_true", help="replace an existing --out")

    s = sub.add_parser(
        "solve",
        help="solve the camera poses from a recording and write calibration.yaml",
        description="Detect the ChArUco board in a recording's images, solve scene_cam "
        "(eye-to-hand: board on the flange) and/or wrist_cam (eye-in-hand: board on the table), "
        "print per-sample and overall figures, write calibration.yaml and an overlay PNG per camera. "
        "Nothing is written unless every camera solved.",
    )
    s.add_argument("bag", help="rosbag2 directory (para-calib capture, or any recording where the board is visible)")
    s.add_argument("--camera", action="append", choices=CAMERAS, help="camera to solve (repeatable; default scene_cam)")
    _add_board_options(s)
    s.add_argument("--out", default="calibration.yaml", help="calibration file to write (default calibration.yaml)")
    s.add_argument("--force", action="store_true", help="overwrite an existing --out")
    s.add_argument(
        "--merge",
        action="store_true",
        help="keep the other cameras of an existing --out (e.g. solve "
        "scene_cam and wrist_cam from two recordings into one file)",
    )
    s.add_argument("--scene-ns", default="/scene_cam", help="scene camera namespace in the bag")
    s.add_argument("--wrist-ns", default="/wrist_cam", help="wrist camera namespace in the bag")

    r = sub.add_parser(
        "refine",
        help="re-estimate the scene camera's pose from a recording of normal operation (marker on the gripper)",
        description="Find the ArUco marker on the gripper in a recording's scene images, take the flange pose "
        "from TF at each image and solve the scene camera's pose (the hand-eye solver's reprojection refinement, "
        "the marker's mount held fixed). Writes --out with scene_cam replaced (other cameras and the board kept "
        "from --calibration). A recording where the arm hardly moves is refused with its coverage figures; "
        "nothing is written then.",
    )
    r.add_argument("bag", help="rosbag2 directory of normal operation (scene images, CameraInfo, /tf)")
    _add_marker_options(r)
    r.add_argument("--calibration", default="", help="the told calibration.yaml (its scene_cam is the initial guess)")
    r.add_argument("--out", default="calibration.yaml", help="calibration file to write (default calibration.yaml)")
    r.add_argument("--force", action="store_true", help="overwrite an existing --out")
    r.add_argument("--scene-ns", default="/scene_cam", help="scene camera namespace in the bag")
    r.add_argument("--min-images", type=int, default=20, help="fewest images with the marker (default 20)")
    r.add_argument(
        "--min-spread-m",
        type=float,
        default=0.03,
        help="the marker's positions must spread at least this much along their second principal axis (std, "
        "metres; default 0.03)",
    )
    return parser


def cmd_board(args) -> int:
    spec = board_spec(args)
    out = Path(args.out)
    png, pdf = out.with_suffix(".png"), out.with_suffix(".pdf")
    existing = [str(p) for p in (png, pdf) if p.exists()]
    if existing and not args.force:
        print(f"para-calib board: {', '.join(existing)} exist: pass --force to overwrite", file=sys.stderr)
        return 2
    spec.write_png(png, dpi=args.dpi)
    spec.write_pdf(pdf, page=args.page)
    w, h = spec.size_m
    print(
        f"para-calib board: wrote {png} ({args.dpi:.0f} dpi) and {pdf} ({args.page}): {spec.squares_x}x"
        f"{spec.squares_y} squares of {1000 * spec.square_m:.1f} mm, markers {1000 * spec.marker_m:.1f} mm, "
        f"{spec.dictionary}, board {1000 * w:.0f} x {1000 * h:.0f} mm. Print at 100 % (no fit-to-page), measure a "
        "square and pass what you measure as --square-m / --marker-m."
    )
    return 0


def _capture_settings(args):
    pivot = None
    if args.pivot_m:
        try:
            pivot = tuple(float(v) for v in args.pivot_m.split(","))
        except ValueError:
            pivot = ()
        if len(pivot) != 3:
            raise ValueError(f"--pivot-m {args.pivot_m!r}: give x,y,z in metres")
    names = tuple(n.strip() for n in args.arm_joint_names.split(","))
    if len(names) != 6:
        raise ValueError(f"--arm-joint-names {args.arm_joint_names!r}: give 6 names")
    robot = graph.resolve_robot(args.robot, args.backend)  # --backend: its deprecated name (warns)
    return CaptureSettings(
        out=Path(args.out),
        camera=args.camera,
        robot=robot,
        poses=args.poses,
        angle_deg=args.angle_deg,
        offset_m=args.offset_m,
        centre=args.centre,
        pivot_m=pivot,
        speed_fraction=args.speed_fraction,
        settle_s=args.settle_s,
        settle_tol_rad=args.settle_tol_rad,
        sample_timeout_s=args.sample_timeout_s,
        scene_ns=args.scene_ns,
        wrist_ns=args.wrist_ns,
        joint_states_topic=args.joint_states_topic,
        joint_trajectory_topic=args.joint_trajectory_topic,
        arm_joint_names=names,
        can_channel=args.can_channel,
        force=args.force,
        zero_gravity=args.manual and robot == "i2rt",
        board=board_spec(args),
    )


def start_sim(rules: list[str], log_dir: Path) -> GraphRun:
    """Start sim_node as its own process (the deploy graph's node and parameter file, plus ``rules``)."""
    overrides = {}
    for rule in rules:
        name, sep, value = rule.partition(":=")
        if not sep or not name:
            raise ValueError(f"--sim-param {rule!r}: write NAME:=VALUE, e.g. calibration_board:=flange")
        overrides[name.strip()] = yaml.safe_load(value)
    check_node_params({"sim_node": overrides})
    graph_run = GraphRun(log_dir)  # the capture node in this process joins its domain
    spec = next(s for s in graph.NODES if s.name == "sim_node")
    graph_run.start_plan([(spec, overrides)])
    return graph_run


def cmd_capture(args) -> int:
    settings = _capture_settings(args)
    group = None
    try:
        if args.start_sim:
            if settings.robot != "sim":
                raise ValueError("--start-sim goes with --robot sim")
            if Path(args.out).exists() and not args.force and not args.dry_run:
                raise ValueError(f"{args.out} exists: choose another --out or pass --force to replace it")
            log_dir = Path(str(args.out).rstrip("/") + "_logs")
            group = start_sim(args.sim_param, log_dir)
            print(f"para-calib capture: sim_node started (log in {log_dir})")
            time.sleep(3.0)
        n = run_capture(
            settings, dry_run=args.dry_run, manual=args.manual, manual_samples=args.samples, still_s=args.still_s
        )
    except CaptureAborted as exc:
        print(f"para-calib capture: stopped: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        if group is not None:
            group.stop(timeout_s=5.0)
    if args.dry_run:
        return 0
    print(
        f"para-calib capture: {n} samples in {args.out}; next: para-calib solve {args.out} --camera "
        f"{args.camera} --out calibration.yaml"
    )
    return 0


def cmd_solve(args) -> int:
    spec = board_spec(args)
    cameras = list(dict.fromkeys(args.camera or ["scene_cam"]))
    out = Path(args.out)
    if out.exists() and not (args.force or args.merge):
        print(
            f"para-calib solve: {out} exists: pass --force to overwrite it (or --merge to add cameras to it)",
            file=sys.stderr,
        )
        return 2
    namespaces = {"scene_cam": args.scene_ns, "wrist_cam": args.wrist_ns}
    solutions = []
    try:
        for camera in cameras:
            solution = solve_camera(args.bag, camera, spec, namespaces[camera])
            print(describe(solution))
            solutions.append(solution)
        write_outputs(solutions, spec, out, force=args.force, merge=args.merge)
    except (CalibrationError, BagError) as exc:
        print(f"para-calib solve: {exc}\nNothing was written.", file=sys.stderr)
        return 1
    return 0


def cmd_refine(args) -> int:
    xyz = _three_numbers(args.marker_xyz_m, "--marker-xyz-m")
    rpy = _three_numbers(args.marker_rpy_deg, "--marker-rpy-deg")
    try:
        spec = ArucoMarkerSpec(args.marker_side_m, args.marker_id, args.marker_dictionary)
        config = RefineConfig(min_samples=args.min_images, min_spread_m=args.min_spread_m)
        T_flange_marker = default_T_gripper_marker(spec.side_m)
        if xyz is not None:
            T_flange_marker[:3, 3] = xyz
        if rpy is not None:
            T_flange_marker[:3, :3] = offset_T((0, 0, 0), rpy)[:3, :3]
        refine_recording(
            args.bag,
            spec,
            T_flange_marker,
            Path(args.out),
            told_file=Path(args.calibration) if args.calibration else None,
            config=config,
            namespace=args.scene_ns,
            force=args.force,
        )
    except (CalibrationError, BagError) as exc:
        print(f"para-calib refine: {exc}\nNothing was written.", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return {"board": cmd_board, "capture": cmd_capture, "solve": cmd_solve, "refine": cmd_refine}[args.command](
            args
        )
    except (ValueError, FileExistsError) as exc:
        print(f"para-calib {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
