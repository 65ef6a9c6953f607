"""Paired comparisons of closed-loop evaluations on the same seeds (ROS-free): the exact McNemar test, the paired
table of two variants, and how far two runs of the same configuration agree episode by episode.

A row is anything with ``seed`` and ``outcome`` (an :class:`~para_ros.deploy.episodes.EpisodeRow`, or a report's
episode read back by :mod:`para_ros.deploy.report_agreement`); :func:`paired_outcomes` pairs on another field when
told (``key``): an operator-judged evaluation on a robot pairs the episodes of one round, having no seeds.
"""

from __future__ import annotations

import math


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` and ``c`` discordant pairs (A only succeeded; B only succeeded):
    ``min(1, 2 * P[X <= min(b, c)])`` with X ~ Binomial(b + c, 1/2); 1 when there are no discordant pairs."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0 (got {b}, {c})")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


def paired_outcomes(rows_a, rows_b, key: str = "seed") -> dict:
    """The paired table of two variants over the seeds both finished: both succeeded, A only, B only, neither; the
    exact McNemar p-value and the difference of success rates (A - B) on those seeds. ``key``: the row field that
    pairs two episodes (``seed``; ``round`` for :mod:`para_ros.deploy.robot_eval`)."""
    a = {getattr(r, key): r.outcome == "success" for r in rows_a}
    b = {getattr(r, key): r.outcome == "success" for r in rows_b}
    seeds = sorted(set(a) & set(b))
    both = sum(a[s] and b[s] for s in seeds)
    a_only = sum(a[s] and not b[s] for s in seeds)
    b_only = sum(b[s] and not a[s] for s in seeds)
    neither = len(seeds) - both - a_only - b_only
    n = len(seeds)
    return {
        "seeds": n,
        "both": both,
        "a_only": a_only,
        "b_only": b_only,
        "neither": neither,
        "difference": (a_only - b_only) / n if n else 0.0,
        "mcnemar_p": mcnemar_exact(a_only, b_only),
        "a_only_seeds": [s for s in seeds if a[s] and not b[s]],
        "b_only_seeds": [s for s in seeds if b[s] and not a[s]],
    }


def outcome_agreement(rows_a, rows_b) -> dict:
    """Over the seeds both runs finished: how many ended with the same outcome (``success``, ``no_grasp``, ...),
    the seeds that did not (with both outcomes), and the paired success table of :func:`paired_outcomes`."""
    a = {r.seed: r.outcome for r in rows_a}
    b = {r.seed: r.outcome for r in rows_b}
    seeds = sorted(set(a) & set(b))
    differing = [{"seed": s, "a": a[s], "b": b[s]} for s in seeds if a[s] != b[s]]
    same = len(seeds) - len(differing)
    return {
        "seeds": len(seeds),
        "same_outcome": same,
        "agreement": same / len(seeds) if seeds else 0.0,
        "differing": differing,
        "paired": paired_outcomes(rows_a, rows_b),
    }
