"""para_ros: PARA (Pixel-Aligned Robot Actions) v4 policy, ROS 2 nodes and a simulated YAM arm.

Built by colcon as an ament_python package on a ROS 2 robot PC, or installed with pip into a plain venv
(``scripts/setup``). The ROS interfaces (``para_msgs``) are a separate CMake package in ``interfaces/para_msgs``.
"""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "para_ros"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(include=["para_core", "para_core.*", "para_ros", "para_ros.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml") + glob("config/*.xml") + glob("config/*.rviz")),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="PARA team",
    maintainer_email="para@example.com",
    description="PARA v4 volumetric policy on ROS 2: inference node, chunk executor, simulated YAM arm.",
    license="Apache-2.0",
    python_requires=">=3.10",
    entry_points={
        "console_scripts": [
            "para-env = para_ros.dds_env:main",
            "para-deploy = para_ros.commands.deploy:main",
            "para-eval-robot = para_ros.commands.eval_robot:main",
            "para-teleop = para_ros.commands.teleop:main",
            "inference_node = para_ros.nodes.inference_node:main",
            "chunk_executor = para_ros.nodes.chunk_executor:main",
            "sim_node = para_ros.nodes.sim_node:main",
            "calibration_tf = para_ros.nodes.calibration_tf:main",
            "calibration_monitor = para_ros.nodes.calibration_monitor:main",
            "para-train = para_core.train.cli:main",
            "para-bag = para_ros.commands.bag:main",
            "para-sim = para_ros.commands.sim:main",
            "para-calib = para_ros.commands.calib:main",
        ],
    },
)
