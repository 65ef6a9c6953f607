"""Thin adapters with upstream APIs: ``tf`` (tf2_ros), ``cv_bridge`` (cv_bridge), and ``transforms`` (the only
ROS pose <-> numpy 4x4 conversions). Each imports the real ROS package when present, else the project fallback."""
