"""Views of PARA, free of ROS: rerun recordings, and what rviz shows of a chunk (as numpy; the nodes make the messages)."""
