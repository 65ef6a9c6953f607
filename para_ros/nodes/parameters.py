"""One typed table per node: the single source of its ROS parameters, its shipped ``config/<node>.yaml`` and ``--help``.

Each :class:`Param` has a name, a default (whose Python type is the parameter's type), a description, and optionally a
numeric range or a set of choices. A parameter is READ-ONLY unless ``dynamic=True``: read-only ones are fixed at start
(``ros2 param set`` is refused by rclpy with "read-only"); dynamic ones are validated and applied by the node's on-set
callback, and a bad value is refused with the reason. Nothing is ever silently ignored.

Types are applied the same way in every node: an integer is accepted for a double (``-p max_rate_hz:=30``), ``"true"``
/ ``"false"`` strings for a bool, a comma-separated string for a string list; anything else is refused naming the
parameter, the value and what it expected. (Parameters are declared with dynamic typing so that rclpy lets the integer
through to this check instead of failing the start with a type exception.)

The registry of every node's table (``parameter_registry``) regenerates ``config/*.yaml`` from the tables
(``python -m para_ros.nodes.parameter_registry --write``); a test checks that the shipped files and the tables agree.
"""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rcl_interfaces.msg import ParameterDescriptor, ParameterType, SetParametersResult

KINDS = ("bool", "int", "float", "str", "float_list", "str_list")


@dataclass(frozen=True)
class Param:
    """One ROS parameter of a node (see the module docstring)."""

    name: str
    default: object
    description: str
    range: tuple[float, float] | None = None  # inclusive bounds of a number (or of every number of a list)
    choices: tuple[str, ...] | None = None  # allowed values of a string
    dynamic: bool = False  # re-configurable while the node runs (the node applies it); else read-only
    length: int | None = None  # exact length of a list
    optional: bool = False  # may stay unset (default None): declared without a value
    kind_override: str | None = None  # the kind of an optional parameter (its default is None)
    section: str = ""  # heading of a group in the YAML file (set on the group's first parameter)

    @property
    def kind(self) -> str:
        if self.kind_override:
            return self.kind_override
        d = self.default
        if isinstance(d, bool):
            return "bool"
        if isinstance(d, int):
            return "int"
        if isinstance(d, float):
            return "float"
        if isinstance(d, str):
            return "str"
        if isinstance(d, (list, tuple)):
            return "str_list" if d and all(isinstance(v, str) for v in d) else "float_list"
        raise TypeError(f"parameter {self.name}: unsupported default {d!r}")

    def coerce(self, value):
        """``value`` as this parameter's type, validated; :class:`ValueError` naming the parameter and the fix."""
        kind = self.kind
        if value is None:
            if self.optional:
                return None
            raise ValueError(f"parameter {self.name}: a value is required ({self._expected()})")
        if kind == "str" and isinstance(value, bool) and self.choices:
            value = _yaml_bool_word(value, self.choices)  # `-p compile_mode:=off`: YAML made the word a bool
        try:
            out = _convert(kind, value)
        except (TypeError, ValueError):
            raise ValueError(f"parameter {self.name}={value!r}: expected {self._expected()}") from None
        numbers = [out] if kind in ("int", "float") else list(out) if kind == "float_list" else []
        if kind == "float" and not math.isfinite(out):
            raise ValueError(f"parameter {self.name}={value!r}: must be a finite number")
        if self.range is not None:
            lo, hi = self.range
            bad = [v for v in numbers if not (lo <= v <= hi)]
            if bad:
                raise ValueError(f"parameter {self.name}={value!r}: must be within [{lo:g}, {hi:g}]")
        if self.choices is not None and out not in self.choices:
            raise ValueError(f"parameter {self.name}={value!r}: use one of {list(self.choices)}")
        if self.length is not None and kind.endswith("_list") and len(out) != self.length:
            raise ValueError(f"parameter {self.name}={value!r}: give exactly {self.length} values")
        return out

    def _expected(self) -> str:
        what = {
            "bool": "true or false",
            "int": "an integer",
            "float": "a number",
            "str": "a string",
            "float_list": "a list of numbers",
            "str_list": "a list of strings",
        }[self.kind]
        if self.range is not None:
            what += f" within [{self.range[0]:g}, {self.range[1]:g}]"
        if self.choices is not None:
            what += f", one of {list(self.choices)}"
        return what

    def constraints(self) -> str:
        """The constraint text of ``ros2 param describe`` (and of --help)."""
        parts = [self._expected()]
        parts.append("re-configurable at run time" if self.dynamic else "read-only (set at start)")
        return "; ".join(parts)


def _yaml_bool_word(value: bool, choices: tuple[str, ...]):
    """The choice a user typed that YAML 1.1 (ROS ``-p name:=value``, parameter files) read as a bool: off / no /
    false for False, on / yes / true for True; ``value`` unchanged when no such word is a choice."""
    words = ("on", "yes", "true") if value else ("off", "no", "false")
    return next((c for c in choices if c.lower() in words), value)


def _convert(kind: str, value):
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no", "on", "off"):
            return value.strip().lower() in ("true", "1", "yes", "on")
        raise ValueError(value)
    if kind == "int":
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError(value)
        return int(value)
    if kind == "float":
        if isinstance(value, bool) or isinstance(value, str):
            raise ValueError(value)
        return float(value)
    if kind == "str":
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return ",".join(value)  # a string list for a comma-separated string (e.g. joint names)
        if not isinstance(value, str):
            raise ValueError(value)
        return value
    if kind == "str_list":
        if isinstance(value, str):
            return [v.strip() for v in value.split(",")] if value.strip() else []
        return [str(v) for v in value]
    if kind == "float_list":
        if isinstance(value, str) or any(isinstance(v, (bool, str)) for v in value):
            raise ValueError(value)
        return [float(v) for v in value]
    raise ValueError(kind)


class ParameterTable:
    """The parameters of one node (in file order), with the file header that introduces them."""

    def __init__(self, node_name: str, params: Sequence[Param], header: str = ""):
        names = [p.name for p in params]
        if len(set(names)) != len(names):
            raise ValueError(f"{node_name}: duplicate parameter names")
        for p in params:
            if not p.optional:
                p.coerce(p.default)  # the table's own defaults must pass its rules
        self.node_name, self.params, self.header = node_name, tuple(params), header
        self.by_name = {p.name: p for p in params}

    def defaults(self) -> dict:
        return {p.name: p.default for p in self.params}

    def coerce_all(self, values: Mapping[str, object]) -> dict:
        """Every value coerced (the defaults for the missing ones); :class:`ValueError` on the first bad one."""
        return {p.name: p.coerce(values.get(p.name, p.default)) for p in self.params}

    # ------------------------------------------------------------------------------------------- on a node
    def declare(self, node, params: Sequence[Param] | None = None) -> dict:
        """Declare the table's parameters (or ``params``: extra ones known only at run time, e.g. per camera view) on
        the rclpy ``node`` and return their coerced values. :raises ValueError: a bad value, naming it."""
        values = {}
        for p in self.params if params is None else params:
            descriptor = ParameterDescriptor(
                description=p.description,
                additional_constraints=p.constraints(),
                read_only=not p.dynamic,
                dynamic_typing=True,
            )
            if p.optional:
                descriptor.type = ParameterType.PARAMETER_NOT_SET
                value = node.declare_parameter(p.name, None, descriptor).value
            else:
                value = node.declare_parameter(p.name, p.default, descriptor).value
            values[p.name] = p.coerce(value)
        return values

    def on_set(self, node, apply: Callable[[dict], None], extra: Sequence[Param] = ()) -> None:
        """Validate every later change (of the table's parameters and ``extra``) and hand the coerced values of the
        dynamic ones to ``apply``, which may raise ValueError to refuse. A read-only one is refused with a reason
        (rclpy refuses it first when it was declared read-only)."""
        known = {**self.by_name, **{p.name: p for p in extra}}

        def callback(changes):
            coerced = {}
            for change in changes:
                p = known.get(change.name)
                if p is None:
                    continue  # use_sim_time and other ROS-owned parameters
                if not p.dynamic:
                    return SetParametersResult(
                        successful=False, reason=f"{p.name} is read-only: restart the node with the new value"
                    )
                try:
                    coerced[p.name] = p.coerce(change.value)
                except ValueError as err:
                    return SetParametersResult(successful=False, reason=str(err))
            if coerced:
                try:
                    apply(coerced)
                except ValueError as err:
                    return SetParametersResult(successful=False, reason=str(err))
                except Exception as err:  # noqa: BLE001 - a set request must never take the node down
                    return SetParametersResult(successful=False, reason=f"not applied: {type(err).__name__}: {err}")
            return SetParametersResult(successful=True)

        node.add_on_set_parameters_callback(callback)

    # ------------------------------------------------------------------------------------------- as text
    def yaml_text(self) -> str:
        """The shipped ``config/<file>.yaml``: header, then each parameter with its description as a comment."""
        lines = [f"# {line}".rstrip() for line in self.header.strip().splitlines()] if self.header else []
        lines += [
            "# Generated from the parameter table in para_ros/nodes/ (python -m "
            "para_ros.nodes.parameter_registry --write);",
            "# edit the table, not this file. Set any of them with -p name:=value or your own --params-file.",
            f"{self.node_name}:",
            "  ros__parameters:",
        ]
        for p in self.params:
            if p.section:
                lines.append(f"    # --- {p.section}")
            mode = "dynamic" if p.dynamic else "read-only"
            for line in textwrap.wrap(f"{p.description} [{mode}]", 112):
                lines.append(f"    # {line}")
            if p.optional:
                lines.append(f"    # {p.name}: (unset)")
            else:
                lines.append(f"    {p.name}: {_yaml_value(p.default)}")
        return "\n".join(lines) + "\n"

    def help_text(self) -> str:
        """The ``--help`` epilog: every parameter, its default and constraints."""
        out = [f"ROS parameters of {self.node_name} (set with --ros-args -p name:=value):"]
        for p in self.params:
            default = "(unset)" if p.optional else _yaml_value(p.default)
            out.append(f"  {p.name} = {default}  [{p.constraints()}]")
            out += [f"      {line}" for line in textwrap.wrap(p.description, 100)]
        return "\n".join(out)


def _yaml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return (
            json.dumps(v)
            if (
                v == ""
                or v.strip() != v
                or any(c in v for c in ":#{}[],&*!|>'\"%@`")
                or v.lower() in ("true", "false", "null", "yes", "no", "on", "off", "~")
            )
            else v
        )
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_yaml_value(x) for x in v) + "]"
    return repr(v)
