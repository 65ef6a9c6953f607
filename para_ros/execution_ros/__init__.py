"""ROS adapters of the chunk executor: ActionChunk <-> numpy, and the two topic backends (JointTrajectory, PoseStamped)."""
