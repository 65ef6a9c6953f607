"""config/para.rviz shows what the graph publishes: both cameras, TF, the markers and the voxel cloud, in the world frame."""

from __future__ import annotations

import yaml

from para_ros.paths import config_file


def _ros_params(name: str, node: str) -> dict:
    return yaml.safe_load(config_file(name).read_text())[node]["ros__parameters"]


def test_rviz_config_matches_the_node_parameters():
    rviz = yaml.safe_load(config_file("para.rviz").read_text())
    manager = rviz["Visualization Manager"]
    displays = {d["Class"].split("/")[-1]: d for d in manager["Displays"]}
    topics = {d["Topic"]["Value"] for d in manager["Displays"] if "Topic" in d}
    inference = _ros_params("inference.yaml", "inference_node")
    assert manager["Global Options"]["Fixed Frame"] == inference["world_frame"]
    assert {"TF", "MarkerArray", "PointCloud2", "Image"} <= set(displays)
    for key in ("markers_topic", "pointcloud_topic", "scene_image_topic", "wrist_image_topic"):
        assert inference[key] in topics, f"rviz does not show {key} = {inference[key]}"
    cloud = displays["PointCloud2"]
    assert cloud["Channel Name"] == "probability"  # the field para_ros.ros_io.rviz.voxel_cloud writes
