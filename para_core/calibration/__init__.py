"""Hand-eye calibration of the scene and wrist cameras, ROS-free.

- ``board``            -- ``CharucoBoardSpec``: the ChArUco board's geometry, its image and printable PNG / PDF.
- ``detection``        -- ``detect_charuco`` (OpenCV ``aruco``) and ``board_pose_from_detection`` (PnP).
- ``handeye``          -- ``solve_eye_to_hand`` / ``solve_eye_in_hand``: OpenCV's closed-form solvers, then a
  least-squares refinement of the reprojection error; residuals and rotation coverage; ``CalibrationError``.
- ``calibration_file`` -- ``calibration.yaml`` (``para_calibration: 1``): load (validated) and save (no overwrite
  without ``force``).
- ``overlay``          -- detected vs reprojected corners drawn on a camera image.

Frames: ``T_a_b`` maps coordinates in frame b to frame a (metres); camera frames are OpenCV optical frames.
"""
