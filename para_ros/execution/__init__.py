"""ROS-free logic of the chunk executor: chunks, their timeline and blending, interpolation, smoothing, the safety filter,
the control loop, the command backends, the executor's state and what it reports on ``/diagnostics``, and the node's
parameter values as its configuration (the YAM itself: ``para_ros.robot``).

Nothing in this package imports rclpy or ROS message types, so every piece is unit-testable on its own;
``para_ros.nodes.chunk_executor`` is the thin rclpy node (ROS I/O only) around
:class:`para_ros.execution.executor_core.ExecutorCore`.
"""
