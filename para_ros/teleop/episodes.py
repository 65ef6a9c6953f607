"""Teleoperated recording's episodes, the ROS-free part: the operator's commands and when each may be given, the
output folder (what ``--continue`` keeps, what is never overwritten) and each episode's metadata file.

Commands (:func:`parse_command`), from the keyboard (the recording episode implied) or on the topic
``/para_teleop/command`` (``std_msgs/String``; every command but ``start`` names its episode first, so a late or
stray message cannot end another episode):

=====================  ==========================  ==========================================================
keyboard               topic                       effect
=====================  ==========================  ==========================================================
``start`` (or Enter)   ``start``                   a new episode's recording opens
``stop``               ``K stop``                  the episode ends, kept, unmarked
``s`` / ``success``    ``K success [NOTE]``        the episode ends, kept, marked success
``f`` / ``failure R``  ``K failure REASON``        the episode ends, kept, marked failure with the reason
``d`` / ``discard``    ``K discard``               the episode ends and its recording is deleted
=====================  ==========================  ==========================================================

:class:`EpisodeDesk` accepts a command only when it applies (a start while idle, the others for the episode that is
recording) and says why it refused one. Each kept episode is a rosbag2 directory ``OUT/episode_NNNNNN`` holding
``teleop.json`` (:func:`episode_metadata`: task, the operator's mark, the calibration used, timing, counts) and,
when a calibration file was given, ``calibration.yaml``, which ``para-bag extract`` takes as the recording's.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

EPISODE_RE = re.compile(r"^episode_(\d{6})$")
METADATA = "teleop.json"
INDEX = "episodes.jsonl"
ENDINGS = ("stop", "success", "failure", "discard")
_SHORT = {"s": "success", "f": "failure", "d": "discard"}


@dataclass(frozen=True)
class TeleopCommand:
    """``kind``: ``start`` or one of :data:`ENDINGS`; ``episode``: the episode named (None: the recording one, from
    the keyboard); ``reason``: a failure's reason or a success's note; ``source``: ``keyboard`` or ``topic``."""

    kind: str
    episode: int | None = None
    reason: str = ""
    source: str = "keyboard"


def parse_command(text: str, source: str = "keyboard") -> TeleopCommand:
    """One operator line -> a :class:`TeleopCommand` (module docstring). ValueError saying the accepted forms."""
    words = text.strip().split()
    episode = None
    if source == "topic" and words and words[0].isdigit():
        episode, words = int(words[0]), words[1:]
    if not words:
        if source == "keyboard" or episode is None:
            if source == "topic":
                raise ValueError("empty command: write start, or EPISODE stop|success|failure REASON|discard")
            return TeleopCommand("start", None, source=source)
        raise ValueError(f"{text.strip()!r}: after the episode write stop, success [NOTE], failure REASON or discard")
    head = _SHORT.get(words[0].lower(), words[0].lower())
    reason = " ".join(words[1:])
    if head in ("start", "go"):
        if episode is not None or reason:
            raise ValueError(f"{text.strip()!r}: write start alone (the next episode number is given by the recorder)")
        return TeleopCommand("start", None, source=source)
    if head not in ENDINGS:
        raise ValueError(
            f"{text.strip()!r}: write start, stop, success [NOTE] (s), failure REASON (f) or discard (d)"
            + ("; on the topic, the episode number first: '3 failure dropped the cube'" if source == "topic" else "")
        )
    if source == "topic" and episode is None:
        raise ValueError(f"{text.strip()!r}: name the episode first, e.g. '0 {head}'")
    if head == "failure" and not reason:
        raise ValueError(f"{text.strip()!r}: a failure needs a reason, e.g. 'failure dropped the cube'")
    if head in ("stop", "discard") and reason:
        raise ValueError(f"{text.strip()!r}: {head} takes no text")
    return TeleopCommand(head, episode, reason, source)


class EpisodeDesk:
    """Where the session stands and which command it takes now (thread-safe: the keyboard and topic threads
    :meth:`offer`, the session loop :meth:`take` s and sets the state with :meth:`recording` / :meth:`idle`)."""

    def __init__(self):
        self._cond = threading.Condition()
        self.episode: int | None = None  # the recording episode, None while idle
        self.next_episode = 0
        self._taken: TeleopCommand | None = None

    def recording(self, episode: int) -> None:
        with self._cond:
            self.episode, self._taken = episode, None
            self._cond.notify_all()

    def idle(self, next_episode: int) -> None:
        with self._cond:
            self.episode, self.next_episode, self._taken = None, next_episode, None
            self._cond.notify_all()

    def offer(self, cmd: TeleopCommand) -> tuple[bool, str]:
        """Accept ``cmd`` if it applies now; (accepted, what happens or why not)."""
        with self._cond:
            k = self.episode
            if self._taken is not None:
                return False, f"refused: {cmd.kind}: the {self._taken.kind} before it is still being done"
            if cmd.kind == "start":
                if k is not None:
                    return False, f"refused: start: episode {k} is recording (stop, mark or discard it first)"
                self._taken = cmd
                self._cond.notify_all()
                return True, f"episode {self.next_episode} starting"
            if k is None:
                return False, (
                    f"refused: {cmd.kind}"
                    + (f" for episode {cmd.episode}" if cmd.episode is not None else "")
                    + f": no episode is running (the next one is {self.next_episode}; start it first)"
                )
            if cmd.episode is not None and cmd.episode != k:
                return False, f"refused: {cmd.kind} for episode {cmd.episode}: it is not running (episode {k} is)"
            self._taken = TeleopCommand(cmd.kind, k, cmd.reason, cmd.source)
            self._cond.notify_all()
            what = {"stop": "stopped (kept, unmarked)", "discard": "discarded"}.get(cmd.kind, f"marked {cmd.kind}")
            return True, f"episode {k} {what}" + (f" ({cmd.reason})" if cmd.reason else "")

    def take(self, timeout_s: float, stop: threading.Event) -> TeleopCommand | None:
        """The accepted command (consumed), waiting up to ``timeout_s``; None when none came or ``stop`` is set."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._taken is None and not stop.is_set():
                left = min(0.1, deadline - time.monotonic())
                if left <= 0:
                    break
                self._cond.wait(left)
            return self._taken


def existing_episodes(out: Path) -> list[int]:
    """The episode numbers of the recordings in ``out`` (``episode_NNNNNN`` directories)."""
    if not out.is_dir():
        return []
    return sorted(int(m.group(1)) for p in out.iterdir() if (m := EPISODE_RE.match(p.name)) and p.is_dir())


def first_episode(out: Path, append: bool) -> int:
    """The number of the session's first episode: 0 in a new folder; after the last recording there with
    ``append`` (``--continue``). ValueError when ``out`` holds recordings and ``append`` is not given (nothing is
    overwritten), or ``out`` is a file."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: is a file; give a folder for the recordings")
    done = existing_episodes(out)
    if done and not append:
        raise ValueError(
            f"--out {out} holds {len(done)} recording(s) already (episode_{done[0]:06d} .. episode_{done[-1]:06d}): "
            "add --continue to append episodes after them, or choose another --out; nothing was changed"
        )
    return done[-1] + 1 if done else 0


def episode_dir(out: Path, episode: int) -> Path:
    return out / f"episode_{episode:06d}"


def episode_metadata(
    episode: int,
    task: str,
    command: TeleopCommand | None,
    robot: str,
    leader: str,
    calibration: str,
    started_at: str,
    duration_s: float,
    counts: dict,
    leader_stats: dict,
) -> dict:
    """``teleop.json`` of one kept episode. ``command`` None: ended without a mark (a stop of the session)."""
    from para_ros.calibration.consumers import file_record  # yaml / hashlib only, but the calibration package

    mark = "unmarked" if command is None or command.kind == "stop" else command.kind
    return {
        "episode": episode,
        "task": task,
        "mark": mark,
        "reason": command.reason if command is not None else "session stopped",
        "marked_by": command.source if command is not None else "",
        "robot": robot,
        "leader": leader,
        "calibration": ({**file_record(calibration), "source": calibration} if calibration else None),
        "started_at": started_at,
        "duration_s": round(duration_s, 3),
        "message_counts": counts,
        "leader_stats": leader_stats,
        "recorded_by": "para-teleop",
    }


def write_episode(out: Path, bag: Path, meta: dict, calibration: str) -> None:
    """Write ``teleop.json`` (and ``calibration.yaml``) into ``bag`` and append its line to ``OUT/episodes.jsonl``."""
    (bag / METADATA).write_text(json.dumps(meta, indent=2))
    if calibration:
        from para_ros.calibration.consumers import keep_next_to

        keep_next_to(calibration, bag)
    with open(out / INDEX, "a") as index:
        index.write(json.dumps({k: meta[k] for k in ("episode", "task", "mark", "reason", "duration_s")}) + "\n")


def discard_episode(out: Path, bag: Path, episode: int, task: str) -> None:
    """Delete the recording ``bag`` of the episode that was recording (no other recording is touched) and note it."""
    shutil.rmtree(bag, ignore_errors=True)
    with open(out / INDEX, "a") as index:
        index.write(json.dumps({"episode": episode, "task": task, "mark": "discarded"}) + "\n")
