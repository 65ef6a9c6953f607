"""ROS-free logic of the chunk executor: chunks, their timeline and blending, interpolation, IK, limits, backends.

Nothing in this package imports rclpy or ROS message types, so every piece is unit-testable on its own;
``para_ros.chunk_executor`` is the thin rclpy node around :class:`para_ros.execution.executor_core.ExecutorCore`.
"""
