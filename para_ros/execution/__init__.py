"""ROS-free logic of the chunk executor: chunks, their timeline and blending, interpolation, smoothing, the safety filter,
the control loop and the command backends (the YAM itself: ``para_ros.robot``).

Nothing in this package imports rclpy or ROS message types, so every piece is unit-testable on its own;
``para_ros.nodes.chunk_executor`` is the thin rclpy node around :class:`para_ros.execution.executor_core.ExecutorCore`.
"""
