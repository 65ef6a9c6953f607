"""Views of PARA outside ROS (rerun recordings)."""
