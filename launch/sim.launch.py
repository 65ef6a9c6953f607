"""Start the embedded simulated YAM rig: ``ros2 launch para_ros sim.launch.py [params_file:=...] [use_sim_time:=...]``.

Runs ``sim_node`` (package ``para_ros``) with ``config/sim.yaml``. It publishes the scene and wrist cameras
(``/scene_cam/*``, ``/wrist_cam/*``), ``/tf``, ``/tf_static`` and ``/joint_states`` like the real rig, and follows
``trajectory_msgs/JointTrajectory`` on ``/joint_trajectory``. With ``publish_clock:=true`` it also drives ``/clock``;
then start the other nodes with ``use_sim_time:=true``.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from launch import LaunchDescription


def generate_launch_description():
    default_params = os.path.join(get_package_share_directory("para_ros"), "config", "sim.yaml")
    params_file = LaunchConfiguration("params_file")
    use_sim_time = LaunchConfiguration("use_sim_time")
    publish_clock = LaunchConfiguration("publish_clock")
    real_time_factor = LaunchConfiguration("real_time_factor")
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                "params_file", default_value=default_params, description="sim_node parameters (ROS params YAML)"
            ),
            DeclareLaunchArgument(
                "use_sim_time", default_value="false", description="stamp with /clock instead of the system clock"
            ),
            DeclareLaunchArgument(
                "publish_clock", default_value="false", description="publish /clock from the simulation"
            ),
            DeclareLaunchArgument(
                "real_time_factor", default_value="1.0", description="simulated seconds per wall-clock second"
            ),
            Node(
                package="para_ros",
                executable="sim_node",
                name="sim_node",
                output="screen",
                emulate_tty=True,
                arguments=["--params-file", "none"],  # the launch file passes the parameters itself
                parameters=[
                    params_file,
                    {
                        "use_sim_time": ParameterValue(use_sim_time, value_type=bool),
                        "publish_clock": ParameterValue(publish_clock, value_type=bool),
                        "real_time_factor": ParameterValue(real_time_factor, value_type=float),
                    },
                ],
            ),
        ]
    )
