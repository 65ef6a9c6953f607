"""How familiar an observation looks to the policy: its image features against those of its training data.

The policy's own confidence (``para_core.model.confidence``) cannot see one failure: an object it never saw. Trained
on red cubes, the shipped policy meets a blue one with a peak mass near 0.8 and heads the wrong way (docs/confidence.md).
What does see it is the backbone: the features of the wrist camera's patches on a blue cube lie far from every
feature the policy met in training. This module keeps a memory of those features and measures how far an
observation's lie from it (the nearest-neighbour patch memory of PatchCore, Roth et al. 2022, applied to the policy's
own features rather than a separate detector's):

- **features**: each view's patch grid after the model's projection (``V4Output.patch_features``, (B, N, F, h, w)),
  the per-patch features the voxel head scores from, before their interpolation to the prediction grid;
- **memory** (one per view): up to ``memory_size`` patch features of the training episodes, chosen by greedy
  k-centre selection (every training patch within the smallest possible distance of one kept), float32;
- **novelty of a view**: the mean over the ``top_patches`` patches farthest from the memory of each one's distance
  to its nearest neighbour there (an unseen object covers a few patches; one patch alone is noise);
- **limit of a view**: the ``limit_quantile`` of the novelty of held-out familiar frames (episodes not in the memory),
  each frame's novelty taken as the median over ``window_frames`` consecutive frames, the way the inference node
  judges it; **novelty ratio** = novelty / limit, above 1 = unfamiliar.

Files: ``familiarity.safetensors`` (the memories, ``memory.<view>``) and ``familiarity.json`` (settings, limits,
what it was built from), in the checkpoint directory, so ``Policy.from_checkpoint`` finds them. ROS-free; nothing is
unpickled.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

FAMILIARITY_WEIGHTS = "familiarity.safetensors"
FAMILIARITY_JSON = "familiarity.json"
FORMAT = "para_familiarity"
FORMAT_VERSION = 1
DISTANCE_BLOCK = 1 << 24  # query x memory distances computed per block, to bound memory


@dataclass
class FamiliaritySettings:
    """How the memory is built and the limits fitted (``para-train familiarity``).

    Attributes:
        memory_size: patch features kept per view (greedy k-centre selection), 16..65536.
        candidates: patch features per view drawn at random from the training frames before the selection (bounds
            the selection's time), at least ``memory_size``.
        top_patches: the novelty of a view is the mean distance of its ``top_patches`` most novel patches, >= 1.
        window_frames: the novelty judged is the median over this many consecutive frames (the inference node's
            window), >= 1.
        limit_quantile: the limit of a view is this quantile of the held-out familiar frames' windowed novelty, in
            (0.5, 1].
        limit_margin: the limit is that quantile times this factor, >= 1 (room for what a held-out set of a few
            dozen episodes did not show).
        seed: the random draw of candidates.
    """

    memory_size: int = 4096
    candidates: int = 60000
    top_patches: int = 3
    window_frames: int = 5
    limit_quantile: float = 0.995
    limit_margin: float = 1.05
    seed: int = 0

    def __post_init__(self) -> None:
        if not 16 <= int(self.memory_size) <= 65536:
            raise ValueError(f"FamiliaritySettings.memory_size={self.memory_size} must be in 16..65536")
        if int(self.candidates) < int(self.memory_size):
            raise ValueError(
                f"FamiliaritySettings.candidates={self.candidates} must be at least memory_size={self.memory_size}"
            )
        if int(self.top_patches) < 1:
            raise ValueError(f"FamiliaritySettings.top_patches={self.top_patches} must be at least 1")
        if int(self.window_frames) < 1:
            raise ValueError(f"FamiliaritySettings.window_frames={self.window_frames} must be at least 1")
        if not 0.5 < float(self.limit_quantile) <= 1.0:
            raise ValueError(f"FamiliaritySettings.limit_quantile={self.limit_quantile} must be in (0.5, 1]")
        if not float(self.limit_margin) >= 1.0:
            raise ValueError(f"FamiliaritySettings.limit_margin={self.limit_margin} must be at least 1")


@dataclass
class Familiarity:
    """The per-view memories and limits of one policy, and how they were made.

    Attributes:
        view_names: the model's views, in its order.
        memory: view -> (M, F) float32 patch features of the training episodes.
        limits: view -> the novelty above which that view is unfamiliar (same units as :meth:`novelty`).
        settings: how it was built.
        model_id: the checkpoint whose features these are (a memory is meaningless for other weights).
        source: what it was built from (episode counts, frames, the held-out quantiles), for the record.
    """

    view_names: tuple[str, ...]
    memory: dict[str, torch.Tensor]
    limits: dict[str, float]
    settings: FamiliaritySettings
    model_id: str = ""
    source: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = [v for v in self.view_names if v not in self.memory or v not in self.limits]
        if missing:
            raise ValueError(f"familiarity: no memory or limit for view(s) {missing} (views {list(self.view_names)})")
        widths = {v: int(self.memory[v].shape[-1]) for v in self.view_names}
        if len(set(widths.values())) != 1 or any(self.memory[v].ndim != 2 for v in self.view_names):
            raise ValueError(f"familiarity: the memories must be (M, F) of one feature width, got {widths}")
        for v in self.view_names:
            if not (math.isfinite(self.limits[v]) and self.limits[v] > 0):
                raise ValueError(
                    f"familiarity: the limit of view {v!r} must be a positive number, got {self.limits[v]}"
                )

    def to(self, device: torch.device | str) -> Familiarity:
        """The same memory with its features on ``device`` (where the policy's features are computed)."""
        return replace(self, memory={v: m.to(device) for v, m in self.memory.items()})

    @property
    def feature_width(self) -> int:
        return int(self.memory[self.view_names[0]].shape[-1])

    def novelty(self, patch_features: torch.Tensor) -> np.ndarray:
        """(N, F, h, w) one observation's per-view patch features, in ``view_names`` order -> (N,) novelty per view
        (mean nearest-neighbour distance of its ``top_patches`` most novel patches)."""
        if patch_features.ndim != 4 or patch_features.shape[0] != len(self.view_names):
            raise ValueError(
                f"familiarity: patch features of shape {tuple(patch_features.shape)}, expected "
                f"({len(self.view_names)}, {self.feature_width}, h, w) for views {list(self.view_names)}"
            )
        if patch_features.shape[1] != self.feature_width:
            raise ValueError(
                f"familiarity: features of width {patch_features.shape[1]}, the memory holds {self.feature_width}: "
                f"was it built for another checkpoint? (built for {self.model_id!r})"
            )
        out = np.zeros(len(self.view_names))
        for i, view in enumerate(self.view_names):
            patches = patch_features[i].flatten(1).T.float()  # (h*w, F)
            d = nearest_distances(patches, self.memory[view].to(patches.device))  # (h*w,); a no-op after to()
            k = min(int(self.settings.top_patches), d.numel())
            out[i] = float(d.topk(k).values.mean())
        return out

    def ratios(self, novelty: np.ndarray) -> np.ndarray:
        """(N,) novelty -> (N,) novelty / limit per view (above 1: unfamiliar)."""
        return np.asarray(novelty, dtype=np.float64) / np.array([self.limits[v] for v in self.view_names])

    # ------------------------------------------------------------------------------------------------ files
    def save(self, directory: str | Path) -> Path:
        """Write ``familiarity.safetensors`` and ``familiarity.json`` into ``directory`` (created)."""
        from safetensors.torch import save_file  # safetensors: loaded on first use, not on import

        from para_core.model.file_modes import normal_file_mode

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tensors = {f"memory.{v}": self.memory[v].float().contiguous().cpu() for v in self.view_names}
        save_file(tensors, str(directory / FAMILIARITY_WEIGHTS))
        (directory / FAMILIARITY_WEIGHTS).chmod(normal_file_mode())
        meta = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "model_id": self.model_id,
            "view_names": list(self.view_names),
            "limits": {v: float(self.limits[v]) for v in self.view_names},
            "settings": asdict(self.settings),
            "source": self.source,
        }
        (directory / FAMILIARITY_JSON).write_text(json.dumps(meta, indent=2) + "\n")
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> Familiarity:
        """Read what :meth:`save` wrote; ValueError naming the problem for a missing or malformed file."""
        from safetensors.torch import load_file  # safetensors: loaded on first use, not on import

        directory = Path(directory)
        meta_path, weights_path = directory / FAMILIARITY_JSON, directory / FAMILIARITY_WEIGHTS
        for p in (meta_path, weights_path):
            if not p.is_file():
                raise ValueError(f"familiarity: {p} is missing (build it with `para-train familiarity`)")
        try:
            meta = json.loads(meta_path.read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"familiarity: {meta_path} is not JSON: {exc}") from None
        if meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
            raise ValueError(
                f"familiarity: {meta_path} is format {meta.get('format')!r} v{meta.get('format_version')}, expected "
                f"{FORMAT!r} v{FORMAT_VERSION}"
            )
        tensors = load_file(str(weights_path))
        views = tuple(meta["view_names"])
        return cls(
            view_names=views,
            memory={v: tensors.get(f"memory.{v}", torch.zeros(0)) for v in views},
            limits={v: float(x) for v, x in meta["limits"].items()},
            settings=FamiliaritySettings(**meta["settings"]),
            model_id=str(meta.get("model_id", "")),
            source=dict(meta.get("source", {})),
        )


def has_familiarity(directory: str | Path) -> bool:
    """Whether ``directory`` holds a familiarity memory (both files)."""
    directory = Path(directory)
    return (directory / FAMILIARITY_JSON).is_file() and (directory / FAMILIARITY_WEIGHTS).is_file()


def nearest_distances(queries: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
    """(Q, F) queries, (M, F) memory -> (Q,) Euclidean distance of each query to its nearest memory row."""
    rows = max(1, DISTANCE_BLOCK // max(1, memory.shape[0]))
    return torch.cat(
        [torch.cdist(queries[i : i + rows], memory).min(dim=1).values for i in range(0, len(queries), rows)]
    )


def k_centre_selection(candidates: torch.Tensor, m: int, seed: int = 0) -> torch.Tensor:
    """(C, F) candidates -> (min(m, C),) indices chosen greedily so that every candidate lies as close as possible to
    a chosen one (each step adds the candidate farthest from those chosen; Gonzalez's 2-approximation)."""
    n = candidates.shape[0]
    if m >= n:
        return torch.arange(n)
    first = int(np.random.default_rng(seed).integers(n))
    chosen = [first]
    d = torch.cdist(candidates, candidates[first : first + 1]).squeeze(1)  # (C,) distance to the chosen set
    for _ in range(m - 1):
        i = int(d.argmax())
        chosen.append(i)
        d = torch.minimum(d, torch.cdist(candidates, candidates[i : i + 1]).squeeze(1))
    return torch.tensor(chosen)


def windowed_median(values: Sequence[float], window: int) -> np.ndarray:
    """(T,) per-frame values -> (T,) the median of each frame's last ``window`` values (fewer at the start)."""
    x = np.asarray(values, dtype=np.float64)
    return np.array([np.median(x[max(0, i - window + 1) : i + 1]) for i in range(len(x))])


def build_familiarity(
    memory_frames: Iterable[torch.Tensor],
    heldout_episodes: Iterable[Iterable[torch.Tensor]],
    view_names: Sequence[str],
    settings: FamiliaritySettings,
    model_id: str = "",
    source: dict | None = None,
) -> Familiarity:
    """The memory from the training frames' patch features and the limits from held-out episodes.

    ``memory_frames``: (N, F, h, w) patch features of each training frame (views in ``view_names`` order);
    ``heldout_episodes``: per held-out episode, its frames' (N, F, h, w) patch features in time order (the windowed
    median runs within an episode)."""
    views = tuple(view_names)
    rng = np.random.default_rng(settings.seed)
    per_view: dict[str, list[torch.Tensor]] = {v: [] for v in views}
    n_frames = 0
    for feats in memory_frames:
        n_frames += 1
        for i, v in enumerate(views):
            per_view[v].append(feats[i].flatten(1).T.float().cpu())  # (h*w, F)
    if n_frames == 0:
        raise ValueError("familiarity: no training frames to build the memory from")
    memory = {}
    for v in views:
        allp = torch.cat(per_view[v])  # (frames * h * w, F)
        take = min(int(settings.candidates), len(allp))
        cand = allp[torch.from_numpy(rng.choice(len(allp), size=take, replace=False))]
        memory[v] = cand[k_centre_selection(cand, int(settings.memory_size), settings.seed)].contiguous()
    provisional = Familiarity(views, memory, {v: 1.0 for v in views}, settings, model_id)
    windowed: list[np.ndarray] = []  # (frames, N) per held-out episode
    n_heldout = 0
    for episode in heldout_episodes:
        novelty = np.stack([provisional.novelty(f) for f in episode])  # (T, N)
        windowed.append(
            np.stack([windowed_median(novelty[:, i], settings.window_frames) for i in range(len(views))], 1)
        )
        n_heldout += 1
    if n_heldout == 0:
        raise ValueError("familiarity: no held-out episodes to fit the limits from (give more than one episode)")
    pooled = np.concatenate(windowed)  # (frames, N)
    quantiles = np.quantile(pooled, settings.limit_quantile, axis=0)  # (N,)
    limits = {v: float(quantiles[i] * settings.limit_margin) for i, v in enumerate(views)}
    record = dict(source or {})
    record.update(
        memory_frames=n_frames,
        heldout_episodes=n_heldout,
        heldout_frames=int(len(pooled)),
        heldout_quantile={v: float(quantiles[i]) for i, v in enumerate(views)},
        heldout_max={v: float(pooled[:, i].max()) for i, v in enumerate(views)},
    )
    return Familiarity(views, memory, limits, settings, model_id, record)
