"""The robot side of camera calibration (ROS-free): capture poses, samples from recordings, solving, and the
calibration file's consumers (para-calib; the recording itself is ``para_ros.deploy.calibration_capture``)."""
