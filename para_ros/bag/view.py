"""Any recording as a rerun recording (``para_ros.viz.rerun_log``): :func:`recording_to_rerun`, behind ``para-bag view
BAG --out FILE.rrd`` (its options: ``para_ros.commands.bag_view``) and ``para-sim eval --rerun``.

The cameras (posed by the recording's TF at each image stamp, with their CameraInfo K and images) and the tool
trajectory come from the synchronised observations (``para_ros.bag.reader``, the inference node's pairing rules);
the predicted chunks (``/para/action_chunk``) and the voxel clouds (``/para/voxels``) are logged at their header
stamps when the recording has them (a ``para-deploy`` run records both). Open the result with ``rerun FILE.rrd``.
"""

from __future__ import annotations

import numpy as np

from para_ros.bag.reader import BagReader, BagTopicConfig
from para_ros.bag.topic_options import progress
from para_ros.stamps import stamp_to_ns
from para_ros.viz.rerun_log import RerunLog

VOXEL_TOPIC = "/para/voxels"
CHUNK_TOPIC = "/para/action_chunk"


def cloud_points(msg) -> tuple[np.ndarray, np.ndarray]:
    """A deserialized ``PointCloud2`` with float32 x, y, z, probability -> ((N, 3) points, (N,) probability)."""
    offsets = {f.name: int(f.offset) for f in msg.fields}
    missing = [n for n in ("x", "y", "z", "probability") if n not in offsets]
    if missing:
        raise ValueError(f"{VOXEL_TOPIC}: PointCloud2 without fields {missing} (has {sorted(offsets)})")
    n = int(msg.width) * int(msg.height)
    raw = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(n, int(msg.point_step))
    col = {
        k: raw[:, o : o + 4].copy().view("<f4").reshape(n)
        for k, o in offsets.items()
        if k in ("x", "y", "z", "probability")
    }
    return np.stack([col["x"], col["y"], col["z"]], axis=1), col["probability"]


def chunk_positions(msg) -> np.ndarray:
    """(T, 3) positions of a deserialized ``para_msgs/ActionChunk``."""
    return np.array([[p.position.x, p.position.y, p.position.z] for p in msg.poses], dtype=np.float64).reshape(-1, 3)


def argmax_voxels(policy) -> np.ndarray | None:
    """(T, 3) centres of each step's most probable voxel in the policy's last output (the chunk before the local
    refinement), or None when the model does not decode without refinement."""
    try:
        return np.asarray(policy.model.decode(policy.last_output, refine=False)[0].positions_world)
    except (TypeError, AttributeError):
        return None


def recording_to_rerun(bag_path, out, config=None, max_frames: int = 0, quiet: bool = True) -> dict:
    """Write the rerun recording ``out`` (.rrd) of the rosbag2 recording ``bag_path``; ``config``: a
    ``BagTopicConfig`` (default: the inference node's topics). -> counts and the reader's summary."""
    config = config or BagTopicConfig.from_inference_yaml(None)
    views = tuple(config.view_names)
    log = RerunLog(out)
    counts = {"observations": 0, "chunks": 0, "clouds": 0}
    with BagReader(bag_path, config) as bag:
        stamps = bag.pair_stamps()
        keep = set(stamps[:max_frames] if max_frames else stamps)
        for obs in progress(bag.observations(keep), len(keep), "view", quiet):
            log.log_observation(obs, views)
            counts["observations"] += 1
        topics = bag.topics
        if CHUNK_TOPIC in topics:
            for _, msg in bag.messages(CHUNK_TOPIC):
                log.log_chunk(stamp_to_ns(msg.header.stamp), chunk_positions(msg))
                counts["chunks"] += 1
        if VOXEL_TOPIC in topics:
            for _, msg in bag.messages(VOXEL_TOPIC):
                pts, prob = cloud_points(msg)
                log.log_voxels(stamp_to_ns(msg.header.stamp), pts, prob)
                counts["clouds"] += 1
        counts["summary"] = bag.stats.summary()
    counts["path"] = log.close()
    return counts
