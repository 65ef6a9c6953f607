"""ROS-free simulated YAM rig (MuJoCo scene, cameras); wrapped into topics by ``para_ros.sim_node``."""
