"""para_ros: rclpy nodes and thin ROS adapters around the ROS-free ``para_core`` library."""
