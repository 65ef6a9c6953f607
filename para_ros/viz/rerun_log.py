"""PARA's 3-D view as a rerun recording (``.rrd``): posed cameras with their images, the end-effector trajectory,
each chunk's predicted path and argmax voxels, and the voxel probability cloud, on the recording's own clock.

Entities (all in the world frame ``world`` = the robot base, z up, metres):

- ``world/cameras/<view>``: ``Transform3D`` (the camera's OpenCV optical pose in base) + ``Pinhole`` (K, image size,
  RDF: x right, y down, z forward); ``world/cameras/<view>/image``: the RGB image.
- ``world/ee``: the tool position (``Points3D``) at each observation; ``world/ee/trajectory``: the path so far
  (``LineStrips3D``, re-logged with every sample, so scrubbing the timeline shows the history up to then).
- ``world/chunk/path``: each chunk's predicted positions as a line; ``world/chunk/argmax``: the same steps as points
  (the argmax voxel of each step, refined as the model decodes it), coloured from the first step (blue) to the last
  (red).
- ``world/voxels``: the most probable voxels (the inference node's ``/para/voxels`` cloud) coloured by probability
  (viridis, scaled to the cloud's maximum).

Timeline ``stamp``: ROS stamps as timestamps (nanoseconds). Open with ``rerun FILE.rrd`` (or drop the file on the
web viewer). Read back in Python with ``rerun.chunk.RrdReader(FILE).stream().collect()``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

TIMELINE = "stamp"


def probability_colors(prob: np.ndarray) -> np.ndarray:
    """(N,) probabilities -> (N, 3) uint8 viridis colours, scaled to the maximum."""
    from matplotlib import colormaps  # matplotlib: loaded on first use, not on import

    p = np.asarray(prob, dtype=np.float64).reshape(-1)
    scale = p.max() if p.size and p.max() > 0 else 1.0
    return (colormaps["viridis"](p / scale)[:, :3] * 255).astype(np.uint8)


def step_colors(n: int) -> np.ndarray:
    """(n, 3) uint8 from blue (first step) to red (last)."""
    f = np.linspace(0.0, 1.0, max(n, 1))[:n, None]
    return (np.array([40, 90, 255]) * (1 - f) + np.array([255, 40, 40]) * f).astype(np.uint8)


class RerunLog:
    """Writes one ``.rrd`` file. Call the ``log_*`` methods in time order, then ``close``.

    :param path: output ``.rrd`` file (its folder is created).
    :param application_id: rerun's application id (the viewer groups recordings by it).
    """

    def __init__(self, path: str | Path, application_id: str = "para"):
        import rerun as rr  # rerun (optional: requirements-data.txt): loaded on first use, not on import

        self.rr = rr
        self.path = Path(path)
        if self.path.suffix != ".rrd":
            raise ValueError(f"rerun output {self.path}: use a .rrd file name")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rec = rr.RecordingStream(application_id)
        self.rec.save(str(self.path))
        self.rec.log("world", rr.ViewCoordinates.RIGHT_HAND_Z_UP, static=True)
        self._ee_path: list[np.ndarray] = []
        self._pinholes: dict[str, tuple] = {}

    def _at(self, stamp_ns: int) -> None:
        self.rec.set_time(TIMELINE, timestamp=np.datetime64(int(stamp_ns), "ns"))

    def log_camera(
        self, stamp_ns: int, view: str, K: np.ndarray, T_world_cam: np.ndarray, image_rgb: np.ndarray | None = None
    ) -> None:
        """A posed pinhole camera: K (3, 3), T_world_cam (4, 4) OpenCV optical -> world, image (H, W, 3) uint8."""
        rr = self.rr
        self._at(stamp_ns)
        T = np.asarray(T_world_cam, dtype=np.float64)
        self.rec.log(f"world/cameras/{view}", rr.Transform3D(translation=T[:3, 3], mat3x3=T[:3, :3]))
        h, w = image_rgb.shape[:2] if image_rgb is not None else (int(round(2 * K[1, 2])), int(round(2 * K[0, 2])))
        key = (tuple(np.asarray(K, dtype=float).ravel()), w, h)
        if self._pinholes.get(view) != key:  # intrinsics logged when they change
            self.rec.log(
                f"world/cameras/{view}",
                rr.Pinhole(
                    image_from_camera=np.asarray(K, dtype=np.float64),
                    resolution=[w, h],
                    camera_xyz=rr.ViewCoordinates.RDF,
                ),
            )
            self._pinholes[view] = key
        if image_rgb is not None:
            self.rec.log(f"world/cameras/{view}/image", rr.Image(np.ascontiguousarray(image_rgb), color_model="RGB"))

    def log_ee(self, stamp_ns: int, T_world_ee: np.ndarray, gripper: float | None = None) -> None:
        """The tool position at ``stamp_ns`` and the trajectory up to it."""
        rr = self.rr
        self._at(stamp_ns)
        p = np.asarray(T_world_ee, dtype=np.float64)[:3, 3]
        self._ee_path.append(p)
        self.rec.log(
            "world/ee",
            rr.Points3D(
                [p],
                radii=0.006,
                colors=[[255, 255, 255]],
                labels=None if gripper is None else [f"gripper {gripper:.2f}"],
            ),
        )
        if len(self._ee_path) > 1:
            self.rec.log(
                "world/ee/trajectory", rr.LineStrips3D([np.stack(self._ee_path)], radii=0.002, colors=[[230, 230, 230]])
            )

    def log_chunk(self, stamp_ns: int, positions_world: np.ndarray, argmax_world: np.ndarray | None = None) -> None:
        """One predicted chunk: (T, 3) positions as a path, (T, 3) argmax voxels (default: the positions) as points."""
        rr = self.rr
        self._at(stamp_ns)
        pos = np.asarray(positions_world, dtype=np.float64).reshape(-1, 3)
        pts = pos if argmax_world is None else np.asarray(argmax_world, dtype=np.float64).reshape(-1, 3)
        self.rec.log("world/chunk/path", rr.LineStrips3D([pos], radii=0.003, colors=[[255, 160, 40]]))
        self.rec.log("world/chunk/argmax", rr.Points3D(pts, radii=0.005, colors=step_colors(len(pts))))

    def log_voxels(self, stamp_ns: int, points_world: np.ndarray, probability: np.ndarray) -> None:
        """The voxel probability cloud: (N, 3) voxel centres, (N,) probabilities (colour and label)."""
        rr = self.rr
        self._at(stamp_ns)
        pts = np.asarray(points_world, dtype=np.float32).reshape(-1, 3)
        self.rec.log("world/voxels", rr.Points3D(pts, radii=0.004, colors=probability_colors(probability)))

    def log_observation(self, obs, view_names) -> None:
        """A synchronised observation (``para_ros.observation.builder.Observation``): every camera at its image
        stamp, the tool at the observation stamp."""
        for view, stamp, cam in zip(view_names, obs.image_stamps_ns, obs.cameras):
            self.log_camera(stamp, view, cam.K, cam.T_world_cam, cam.image_rgb)
        self.log_ee(obs.stamp_ns, obs.T_world_ee, obs.gripper)

    def log_policy_output(self, stamp_ns: int, out, argmax_world: np.ndarray | None = None) -> None:
        """A ``PolicyOutput``: its chunk (path + argmax voxels) and its top voxels (the node's /para/voxels)."""
        self.log_chunk(stamp_ns, out.positions_world, argmax_world)
        self.log_voxels(stamp_ns, out.top_voxels_world, out.top_voxels_prob)

    def close(self) -> Path:
        self.rec.flush()
        if hasattr(self.rec, "disconnect"):
            self.rec.disconnect()
        return self.path


def read_entities(path: str | Path) -> dict[str, list[dict]]:
    """The rows of a ``.rrd`` file per entity path: ``{entity: [{column: value, ...}, ...]}`` (rerun's RrdReader);
    timestamp columns (the ``stamp`` timeline) as int nanoseconds. For tests and tools."""
    import pyarrow as pa  # pyarrow, rerun (optional): loaded on first use, not on import
    from rerun.chunk import RrdReader

    out: dict[str, list[dict]] = {}
    for chunk in RrdReader(str(path)).stream().collect().stream():
        rb = chunk.to_record_batch()
        cols = {
            n: (
                rb.column(n).cast(pa.int64()) if pa.types.is_timestamp(rb.schema.field(n).type) else rb.column(n)
            ).to_pylist()
            for n in rb.schema.names
        }
        for i in range(rb.num_rows):
            out.setdefault(chunk.entity_path, []).append({n: v[i] for n, v in cols.items()})
    for rows in out.values():
        rows.sort(key=lambda r: (r.get(TIMELINE) is not None, r.get(TIMELINE)))
    return out
