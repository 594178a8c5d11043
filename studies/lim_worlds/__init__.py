"""Study ``lim_worlds``: is there a world of simrec's generator in which a tuned rank-k SVD loses
to the tuned MF models, as Lim, McAuley & Lanckriet (RecSys'15, Table 1) report on their data?

On the paper-like worlds of `simrec.world.PRESETS` (4-dimensional tastes) a truncated SVD beats
both MF-AUC and MF-ADG (study ``opt_adg``), so those worlds cannot stand in for Lim's datasets on
that comparison. This study moves the generator's free parameters away from the presets — the
taste dimension d, the popularity (Zipf) exponent and the affinity scale (how personal tastes
are) — at a paper dataset's size and density: each world keeps its base preset's catalogue and
has its offset re-calibrated to Lim's |O⁺| (`simrec.missing.calibrate_offset`), is sub-sampled to
``data.n_users`` users, observed by SRS and split per user as in ``opt_adg``. Every world is drawn
from the same keys (common random numbers), so two worlds differ by their parameters only.

Per world, and per real dataset present (ml-latest-small, HetRec last.fm), a cell reports the
statistics of the observed positives (positives per user and its coefficient of variation, the
log-log slope of item popularity, the effective rank holding half of ||O⁺||²_F, the first
singular value's share) and, for popularity, SVD, MF-AUC, MF-ADG and (in simulation) the
true-quality oracle, each searched on fold 0's validation split as in ``opt_adg``
(`simrec_studies.common.lim.search`: wide log grids, coordinate search, steps past a grid's edge,
early stopping on validation ADG; SVD ranks down to 1), the test means of Lim's five measures and each model's mean
per-user differences from SVD and from popularity with their standard errors over the test users.
The report calls a model better or worse than a baseline beyond 2 standard errors, a tie
otherwise, and asks of each world whether SVD loses to both MF models on every measure, and
whether the MF models there learn more than popularity. The ``dense`` preset adds the
movielens-like base (72 positives per user where the lastfm-like one has 10).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from simrec.runner import Study
from simrec.world import PRESETS as WORLD_PRESETS
from simrec_studies.common import lim
from simrec_studies.common.lim import PRESET_TRAINING, DataConfig, TrainConfig
from simrec_studies.lim_worlds.compute import cells, compute
from simrec_studies.lim_worlds.report import report

METHODS = ("oracle", "popularity", "svd", "mf_auc", "mf_adg")
#: the SVD rank grid: opt_adg's selects its smallest rank, 5, on the sparse high-dimensional worlds
SVD_RANKS = (1, 2, 5, 10, 20, 50, 100, 200)


@dataclass(frozen=True)
class LimWorldsConfig:
    """The worlds of a run (every combination of the generator values below on every base) and
    how each is built and its models trained."""
    #: world presets whose catalogue each world keeps, and Lim's |O⁺| for the paper-like ones
    bases: tuple[str, ...] = ("lastfm",)
    dims: tuple[int, ...] = (4, 16, 64)                       # taste dimension d
    popularity_exponents: tuple[float, ...] = (0.3, 1.0)      # Zipf exponent of the item bias
    affinity_scales: tuple[float, ...] = (2.3, 4.0)           # SD of the personal part of the logit
    methods: tuple[str, ...] = METHODS                        # must hold svd, popularity and an MF model
    real: bool = True                                         # also the real datasets (when present)
    #: only fold 0 is used (2 is the fewest `DataConfig` allows)
    data: DataConfig = field(default_factory=lambda: DataConfig(n_users=2000, n_folds=2))
    #: opt_adg's default training, with SVD ranks down to 1 (a rank-1 SVD is close to popularity)
    training: TrainConfig = field(default_factory=lambda: dataclasses.replace(PRESET_TRAINING["default"],
                                                                              svd_ranks=SVD_RANKS))

    def __post_init__(self):
        unknown = [b for b in self.bases if b not in WORLD_PRESETS]
        if unknown:
            raise ValueError(f"bases: unknown world presets {unknown}; choose from {sorted(WORLD_PRESETS)}")
        if not self.dims or min(self.dims) < 1:
            raise ValueError(f"dims must be taste dimensions >= 1, got {self.dims}")
        for name in ("popularity_exponents", "affinity_scales"):
            values = getattr(self, name)
            if not values or any(not (math.isfinite(v) and v >= 0) for v in values):
                raise ValueError(f"{name} must be finite numbers >= 0, got {values}")
        if not {"svd", "popularity"} <= set(self.methods) or not set(self.methods) & set(lim.MF_METHODS) \
                or any(m not in METHODS for m in self.methods):
            raise ValueError(f"methods must be a subset of {METHODS} holding svd, popularity and an MF model, "
                             f"got {self.methods}")


PRESETS = {
    "smoke": LimWorldsConfig(bases=("tiny",), dims=(2, 4), popularity_exponents=(0.8,), affinity_scales=(3.0,),
                             real=False, data=DataConfig(n_users=0, n_folds=2), training=PRESET_TRAINING["smoke"]),
    "default": LimWorldsConfig(),
    # also the movielens-like base (72 positives per user, 7x lastfm's density), where MF can learn richer tastes
    "dense": LimWorldsConfig(bases=("lastfm", "movielens")),
}

STUDY = Study(
    name="lim_worlds",
    description="Lim et al. Table 1's SVD claim against simrec's generator: tuned SVD vs MF-AUC and "
                "MF-ADG over taste dimension, popularity exponent and affinity scale at a Lim dataset's "
                "size, with each world's statistics beside the real datasets'",
    presets=PRESETS, cells=cells, compute=compute, report=report,
    columns={"dataset": str, "dim": int, "popularity_exponent": float, "affinity_scale": float,
             "method": str, "l2": float, "lr": float, "rank": int, "at_edge": str, "metric": str,
             "value": float, "vs_svd": float, "vs_svd_se": float, "vs_popularity": float,
             "vs_popularity_se": float},
    data_files=lim.data_files, expected_seconds={"smoke": 20, "default": 240, "dense": 900}, cell_threads=2)
