"""ROS-free simulated YAM rig (MuJoCo scene, cameras); wrapped into topics by ``para_ros.nodes.sim_node``."""
