"""The live calibration monitor over the scripted expert's pick-and-place episodes in the simulator (ROS-free).

Runs ``--episodes`` expert episodes (:func:`para_ros.sim.expert.plan_pick_place` followed through the YAM's IK, seeded layouts) with the ArUco
marker on the gripper, scene images at 10 Hz and ``--size`` pixels; feeds every image to
:class:`para_core.calibration.live_monitor.MarkerMonitor` with the told (nominal) scene camera pose, and prints: how
often the marker is seen, the per-image error, and the monitor's levels over the whole run (normal operation: every
verdict should be OK or UNKNOWN, never WARN / ERROR). With ``--knock-at-s`` each episode's scene camera is knocked
by ``--knock-xyz-m`` / ``--knock-rpy-deg`` at that episode time and the time to the first WARN / ERROR after the
knock is printed per episode. Then, with ``--refine``, the camera pose is re-estimated from all the marker
detections of the knocked run (:func:`para_core.calibration.marker_refine.refine_scene_camera`) and compared with
the simulator's truth. Usage:
    python bench/bench_calibration_monitor.py [--episodes 20] [--knock-at-s 4 --refine]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from para_core.calibration.live_monitor import ERROR, OK, UNKNOWN, WARN, MarkerMonitor, MonitorConfig, check_marker
from para_core.calibration.marker import ArucoMarkerSpec, detect_marker
from para_core.calibration.marker_refine import MarkerSample, refine_scene_camera
from para_ros.calibration.solve import pose_error
from para_ros.robot.yam_ik import YamKinematics
from para_ros.sim.calibration_marker import MARKER_BODY, MarkerMount
from para_ros.sim.disturbances import CameraKnock, DisturbanceConfig, Disturbances
from para_ros.sim.expert import plan_pick_place
from para_ros.sim.pick_place import apply_layout, sample_layout
from para_ros.sim.told_frames import told_frames
from para_ros.sim.yam_scene import GRASP_SITE, SimConfig, YamSim


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=1000, help="layout seed of the first episode")
    ap.add_argument("--size", type=int, default=256, help="scene image side, pixels (the sim's default 256)")
    ap.add_argument("--knock-at-s", type=float, default=-1.0, help="knock the scene camera at this episode time")
    ap.add_argument("--knock-xyz-m", type=float, nargs=3, default=(0.01, 0.0, 0.0))
    ap.add_argument("--knock-rpy-deg", type=float, nargs=3, default=(0.0, 1.0, 0.0))
    ap.add_argument("--refine", action="store_true", help="re-estimate the knocked camera from the detections")
    args = ap.parse_args()

    spec = ArucoMarkerSpec()
    config = SimConfig(scene_extras=(MarkerMount(spec),))
    sim = YamSim(config)
    told = told_frames(config).T_base_scene_cam
    knock = None if args.knock_at_s < 0 else CameraKnock(args.knock_at_s, args.knock_xyz_m, args.knock_rpy_deg)
    dist = Disturbances(DisturbanceConfig(knock=knock), config.scene_cam_true_T_world_cam())
    T_flange_marker = sim.T_parent_child("gripper", MARKER_BODY)
    T_site_flange = np.linalg.inv(sim.T_parent_child("gripper", GRASP_SITE))
    K = sim.intrinsics("scene", args.size, args.size).copy()
    K[:2, 2] -= 0.5  # OpenCV pixel-centre convention
    kin = YamKinematics()
    monitor = MarkerMonitor(spec, T_flange_marker, MonitorConfig())
    levels = {OK: 0, WARN: 0, ERROR: 0, UNKNOWN: 0}
    errors_px, errors_mm, flag_delays, samples = [], [], [], []
    sim_s, images, seen = 0.0, 0, 0
    t0 = time.monotonic()
    for ep in range(args.episodes):
        stamp0 = sim_s + 10.0  # a gap between episodes: the window starts afresh
        monitor.reset()

        layout = sample_layout(args.first_seed + ep)
        result = _run_with_monitor(sim, kin, layout, dist, monitor, told, K, args.size, T_site_flange, stamp0)
        for t, level, check, T_bf, corners in result:
            images += 1
            levels[level] += 1
            if check is not None:
                seen += 1
                if knock is None or t - stamp0 < knock.at_s - 1e-6:
                    errors_px.append(check.error_px)
                    errors_mm.append(check.error_mm)
                elif corners is not None:
                    samples.append(MarkerSample(corners, T_bf, K))
        if knock is not None:
            flagged = [t - stamp0 - knock.at_s for t, level, *_ in result if level in (WARN, ERROR)]
            flagged = [d for d in flagged if d >= -1e-6]
            flag_delays.append(flagged[0] if flagged else float("inf"))
        sim_s = stamp0 + sim.time_s
    wall = time.monotonic() - t0
    print(f"{args.episodes} expert episodes, {images} scene images ({images / 10.0:.0f} s at 10 Hz), {wall:.0f} s wall")
    print(f"marker seen in {seen} of {images} images ({100.0 * seen / max(images, 1):.1f} %)")
    if errors_px:
        print(
            f"per-image error (told = truth): median {np.median(errors_px):.2f} px / {np.median(errors_mm):.2f} mm, "
            f"95th percentile {np.percentile(errors_px, 95):.2f} px, max {np.max(errors_px):.2f} px"
        )
    print("monitor levels over all images: " + ", ".join(f"{k} {v}" for k, v in levels.items()))
    if knock is not None:
        d = np.asarray(flag_delays)
        print(
            f"knock {list(knock.xyz_m)} m / {list(knock.rpy_deg)} deg at {knock.at_s} s: flagged in "
            f"{int(np.isfinite(d).sum())} of {len(d)} episodes, delay median {np.median(d[np.isfinite(d)]):.1f} s, "
            f"max {np.max(d):.1f} s"
        )
        if args.refine and samples:
            res, cov = refine_scene_camera(samples, spec, T_flange_marker, told)
            truth = dist.knocked_T_world_cam()
            mm, deg = pose_error(res.T_parent_cam, truth)
            mm0, deg0 = pose_error(told, truth)
            print(
                f"refine from {len(samples)} knocked images: told {mm0:.1f} mm / {deg0:.2f} deg off the truth -> "
                f"{mm:.2f} mm / {deg:.3f} deg ({res.reprojection_rms_px:.2f} px rms; {cov.text()})"
            )


def _run_with_monitor(sim, kin, layout, dist, monitor, told, K, size, T_site_flange, stamp0):
    """One expert episode with the scene camera checked at 10 Hz: [(stamp, level, check, T_base_flange, corners)]."""
    sim.reset()
    apply_layout(sim, layout)
    dist.reset(sim)
    q = sim.joint_positions()
    plan = plan_pick_place(sim.site_pose()[:3, 3], layout, sim.config.cube_half_size_m)
    out, next_frame, period = [], 0.0, 0.02
    for _ in range(int(np.ceil(plan.duration_s / period)) + 1):
        t = sim.time_s
        if t + 1e-9 >= next_frame:
            dist.update(sim)
            T_bf = sim.site_pose(GRASP_SITE) @ T_site_flange
            corners = detect_marker(sim.render("scene", size, size), monitor.spec)
            stamp = stamp0 + t
            check = None
            if corners is None:
                monitor.add_unseen(stamp)
            else:
                check = check_marker(corners, T_bf, monitor.T_flange_marker, told, K, monitor.spec, stamp_s=stamp)
                monitor.add_check(check)
            out.append((stamp, monitor.status().level, check, T_bf, corners))
            next_frame += 0.1
        T, g = plan.command_at(t + period)
        res = kin.ik(T, q[:6])
        q = np.concatenate([res.q_rad, [g]])
        sim.set_joint_targets(q)
        sim.step(period)
    return out


if __name__ == "__main__":
    main()
