"""ROS side of camera calibration: capture poses, recording, samples from bags, solving (para-calib)."""
