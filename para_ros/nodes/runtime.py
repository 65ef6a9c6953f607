"""The one ``main()`` behind every node entry point: DDS env, arguments, parameters file, spin, clean shutdown.

* The loopback DDS environment (``para_ros.dds_env``) is applied before rclpy starts, keeping the caller's
  ``ROS_DOMAIN_ID`` (never a random one: separately started nodes must meet).
* Arguments before ``--ros-args`` are the command's own (``--help``, ``--params-file``); everything from
  ``--ros-args`` on goes to ROS untouched, so ``ros2 run`` / ``ros2 launch`` / ``para-deploy`` all work.
* The node's shipped parameter file (``config/<node>.yaml``) is loaded FIRST, so every ``--params-file`` and
  ``-p name:=value`` the caller adds after ``--ros-args`` overrides it. ``--params-file none`` loads no file.
* SIGINT and SIGTERM raise ``KeyboardInterrupt`` in the main thread (rclpy's own signal handler is off), so the node's
  ``shutdown()`` hook runs BEFORE the context goes away: a control thread stops before its publishers become invalid.
* A stop signal always ends the process: one still alive ``stop_grace_s`` after the first signal (an interrupt
  swallowed on its way out of a callback, a clean-up that hangs) exits without its clean-up, saying so. The spin is
  rclpy's own ``executor.spin()`` (a loop of ``spin_once(timeout)`` would create an rcl timer at every wake). A node
  whose parent died gets SIGTERM (``para-deploy`` asks the kernel for it); without the grace such a node, hung in its
  clean-up, would keep its name in the domain for good.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence

from para_ros.dds_env import apply_loopback_dds_env
from para_ros.paths import config_file


def split_ros_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(own arguments, ROS arguments starting at ``--ros-args``)."""
    argv = list(argv)
    if "--ros-args" in argv:
        i = argv.index("--ros-args")
        return argv[:i], argv[i:]
    return argv, []


_stop_signals: list[int] = []  # the SIGINT / SIGTERM received by this process, in order
STOP_GRACE_S = 10.0  # seconds a node may take to stop after its first stop signal before it exits without clean-up
_stop_grace_s: list[float | None] = [None]  # run_node's grace while it runs (None outside it: the handler arms nothing)


def _exit_after_grace(prog: str, signum: int, grace_s: float) -> None:
    print(
        f"{prog}: still running {grace_s:g} s after {signal.Signals(signum).name}: exiting without a clean shutdown",
        file=sys.stderr,
        flush=True,
    )
    os._exit(128 + signum)


def _raise_keyboard_interrupt(signum, frame):  # noqa: ARG001 - signal handler signature
    grace_s = _stop_grace_s[0]
    if not _stop_signals and grace_s is not None:
        prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "node"
        timer = threading.Timer(grace_s, _exit_after_grace, args=(prog, signum, grace_s))
        timer.daemon = True
        timer.start()
    _stop_signals.append(signum)
    raise KeyboardInterrupt


def stopped_by_signal(exc: BaseException) -> bool:
    """Whether ``exc`` out of ``spin()`` is the stop signal itself: the KeyboardInterrupt the handler raises, or what
    rclpy's C++ layer turned it into when it landed inside a conversion pybind11 was doing (a message being taken is
    built by Python code: the interrupt comes out as ``RuntimeError: Unable to convert call argument ...``; this
    happens under load, and without this check the node would exit with status 1)."""
    return isinstance(exc, KeyboardInterrupt) or bool(_stop_signals)


def run_node(
    build_node: Callable[[], object],
    *,
    prog: str,
    description: str,
    default_params_file: str,
    argv: Sequence[str] | None = None,
    epilog: str | None = None,
    before_init: Callable[[argparse.Namespace], None] | None = None,
    stop_grace_s: float = STOP_GRACE_S,
) -> int:
    """Parse arguments, start rclpy, build the node with ``build_node()`` and spin it until SIGINT/SIGTERM.

    :param build_node: returns an ``rclpy.node.Node``, or an object with a ``.node`` attribute holding one; an optional
        ``shutdown()`` method on either runs before the node is destroyed.
    :param default_params_file: file name in ``config/`` loaded before the caller's ROS arguments.
    :param epilog: the ``--help`` text after the options: the node's parameter table (``ParameterTable.help_text``).
    :param stop_grace_s: seconds after the first stop signal after which the process exits without clean-up.
    :returns: the process exit status (0, or 2 for a configuration error the node raised as ``ValueError``).
    """
    apply_loopback_dds_env(pick_domain=False)
    own, ros_args = split_ros_args(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog=prog, description=description, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--params-file",
        default=None,
        help=f"ROS parameters YAML loaded before any --ros-args (default: the package's "
        f"config/{default_params_file}; 'none' for no file). ROS arguments (-p name:=value, "
        f"--params-file, -r remaps) go after --ros-args.",
    )
    args = parser.parse_args(own)
    if before_init is not None:
        before_init(args)

    import rclpy  # rclpy: loaded on first use, not on import
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    params_file = args.params_file or str(config_file(default_params_file))
    node_args = ["--ros-args", "--params-file", params_file] if params_file.lower() != "none" else []
    node_args += ros_args
    _stop_signals.clear()
    _stop_grace_s[0] = stop_grace_s
    signal.signal(signal.SIGINT, _raise_keyboard_interrupt)
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    rclpy.init(args=[prog, *node_args], signal_handler_options=SignalHandlerOptions.NO)
    built = None
    try:
        built = build_node()
        node = getattr(built, "node", built)
        executor = SingleThreadedExecutor()  # nodes run long work in their own threads, never in callbacks
        executor.add_node(node)
        executor.spin()
    except KeyboardInterrupt:
        pass
    except Exception as exc:  # noqa: BLE001 - re-raised unless it is the stop signal in disguise
        if stopped_by_signal(exc):
            pass
        elif isinstance(exc, ValueError):  # a configuration error the node raised
            print(f"{prog}: {exc}", file=sys.stderr)
            return 2
        else:
            raise
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not interrupt the clean-up
        if built is not None:
            for owner in (built, getattr(built, "node", None)):
                if owner is not None and hasattr(owner, "shutdown"):
                    owner.shutdown()
                    break
            getattr(built, "node", built).destroy_node()
        rclpy.try_shutdown()
        _disarm_grace()
    return 0


def _disarm_grace() -> None:
    """``run_node`` is over: a later call of the handler arms nothing. A timer a stop signal armed keeps running: the
    process is on its way out, and the interpreter's own exit (joining threads) can hang as well."""
    _stop_grace_s[0] = None


def time_jump_text(jump, now_s: float) -> str:
    """What an rclpy clock jump (``rclpy.time_source`` ``TimeJump``) was, for logs and diagnostics of every node."""
    change = getattr(jump.clock_change, "name", str(jump.clock_change))
    if change in ("ROS_TIME_ACTIVATED", "ROS_TIME_DEACTIVATED"):
        return f"time source changed ({change})"
    return f"clock jumped back by {-jump.delta.nanoseconds / 1e9:.3f} s to t={now_s:.3f} s"
