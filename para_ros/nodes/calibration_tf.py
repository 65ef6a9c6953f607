"""``calibration_tf``: publish a ``calibration.yaml``'s camera transforms on ``/tf_static`` (latched).

On a real rig nothing else knows where the scene camera is: this node publishes ``cameras.scene_cam`` as
``base`` -> ``scene_cam_optical_frame`` (whatever frame names the file holds), and, with ``publish_wrist``,
``cameras.wrist_cam`` as ``gripper`` -> ``wrist_cam_optical_frame`` (for an arm whose driver publishes the arm's TF but
not the wrist camera; with backend ``i2rt`` the executor publishes the wrist mount itself, from the same file).
Started by the deploy graph (:mod:`para_ros.deploy.graph`) when a calibration file is given.
"""

from __future__ import annotations

from geometry_msgs.msg import TransformStamped
from rclpy.node import Node

from para_ros.adapters.tf import StaticTransformBroadcaster
from para_ros.adapters.transforms import matrix_to_transform
from para_ros.calibration.consumers import static_transforms
from para_ros.nodes.parameters import Param, ParameterTable
from para_ros.nodes.runtime import run_node

NODE_NAME = "calibration_tf"

PARAMETERS = ParameterTable(
    NODE_NAME,
    [
        Param(
            "calibration_file",
            "",
            "calibration.yaml (para-calib solve) whose camera transforms are published; required.",
            section="calibration",
        ),
        Param("publish_wrist", False, "Also publish the wrist mount (gripper -> wrist camera) as a static transform."),
    ],
    header="""calibration_tf: publishes a calibration.yaml's camera transforms on /tf_static (para-calib solve writes the
file). Frames and units come from the file (metres, quaternions x, y, z, w).""",
)


class CalibrationTfNode(Node):
    """See the module docstring."""

    def __init__(self, node_name: str = NODE_NAME, **kwargs):
        super().__init__(node_name, **kwargs)
        self.params = p = PARAMETERS.declare(self)
        if not p["calibration_file"]:
            raise ValueError("calibration_tf: set calibration_file to a calibration.yaml (para-calib solve writes one)")
        transforms = static_transforms(p["calibration_file"], include_wrist=p["publish_wrist"])
        if not transforms:
            raise ValueError(
                f"calibration_tf: {p['calibration_file']} holds no camera to publish (scene_cam"
                f"{' or wrist_cam' if p['publish_wrist'] else ''}); calibrate it with para-calib solve"
            )
        self.broadcaster = StaticTransformBroadcaster(self)
        self.broadcaster.sendTransform([self._msg(parent, child, T) for parent, child, T in transforms])
        self.get_logger().info(
            "publishing from "
            + p["calibration_file"]
            + ": "
            + ", ".join(f"{parent} -> {child}" for parent, child, _ in transforms)
        )

    def _msg(self, parent: str, child: str, T):
        msg = TransformStamped()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id, msg.child_frame_id = parent, child
        msg.transform = matrix_to_transform(T)
        return msg


def main(argv: list[str] | None = None) -> int:
    """Run the node until Ctrl-C / SIGINT / SIGTERM."""
    return run_node(
        CalibrationTfNode,
        prog=NODE_NAME,
        description="Publish a calibration.yaml's camera transforms on /tf_static.",
        default_params_file="calibration_tf.yaml",
        argv=argv,
        epilog=PARAMETERS.help_text(),
    )


if __name__ == "__main__":
    raise SystemExit(main())
