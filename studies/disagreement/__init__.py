"""Study ``disagreement``: do DCG and nDCG rank many models the same way? (Jeunen et al. KDD'24 App. A)

Jeunen, Potapov and Ustimenko train 192 models on a per-user 50 % of MovieLens-1M (ratings >= 4,
items with >= 5 users) — KUNN on a 9 x 9 grid of neighbourhood sizes and EASE^R on 111 values of
lambda — and score them on the other 50 % with DCG@100 and nDCG@100. The two metrics correlate
(Pearson 0.63, Kendall 0.50) yet order a random pair of models differently 25 % of the time. This
study repeats that on ml-latest-small (the MovieLens sample shipped beside the checkout; skipped
with a note when absent) and on a simulated world, where simrec also knows

* the truth: every model's DCG@100 on the complete relevant sets P+ minus the training items
  (the utility a user would experience), so it can say which of DCG and nDCG on the observed
  half orders the 192 models closer to it (Kendall tau against the complete-data metric);
* why it happens: the paper notes that the disagreement vanishes when every user has the same
  number of held-out items (nDCG is then DCG over a constant). The study draws held-out sets of
  controlled size n_u = clip(round(m exp(s z_u - s^2/2)), 1, n_max), z_u ~ N(0, 1) shared across
  s, as the first n_u items of one uniformly random order of each user's P+ minus train
  (so the sets are nested across s), and shows the inversion rate growing with s
  (s = 0: exactly m items for every user).

Metrics are simrec's (binary gain, IDCG over min(K, |rel|), tie-aware, training items excluded);
the statistics are `simrec.stats.pearson`, `kendall_tau` and `pairwise_inversion_rate` (a DCG
tie with different nDCG counts as a disagreement, pairs tied on both are skipped).

The package: this module holds the configuration (`DisagreementConfig`, `PRESETS`), the record
schema (`COLUMNS`) and `STUDY`; `compute` the data sets (setup), the model grids and their metrics
(cells, compute); `report` the tables, figures, the claims of Jeunen et al. App. A beside ours and
the prose.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from simrec import validate
from simrec.runner import Study
from simrec.world import WorldConfig
from simrec_studies.common.configs import checked
from simrec_studies.disagreement.compute import REAL_DATA, Dataset, Shared, cells, compute, setup
from simrec_studies.disagreement.report import PAPER, report

__all__ = ["DisagreementConfig", "COLUMNS", "PRESETS", "STUDY", "PAPER", "REAL_DATA", "Dataset", "Shared", "cells",
           "compute", "setup"]

#: the record schema (unused coordinates hold "", NaN or 0)
COLUMNS = {
    "data": str,            # the cell: "ml-latest-small" | "simulated"
    "part": str,            # "model": a model's metric on a target; "data": a size or the wall
                            # time of the cell; "held-out sizes": held-out counts per spread
    "family": str,          # part "model": "EASE" | "KUNN"
    "l2": float,            # EASE's lambda
    "user_k": int,          # KUNN's Ku
    "item_k": int,          # KUNN's Ki
    "target": str,          # relevant sets scored: "observed test" | "complete" (P+ minus train) |
                            # "held-out" (controlled count; also part "held-out sizes")
    "spread": float,        # spread s of target "held-out"
    "statistic": str,       # part "model": the metric (dcg@k, ndcg@k); "data": "users", "items",
                            # "train interactions", "test interactions", "wall time (s)" (fitting
                            # and scoring every model); "held-out sizes": "users", "mean", "sd"
    "value": float,
}


@dataclass(frozen=True)
class DisagreementConfig:
    """The EASE and KUNN grids, the real and simulated data, and the controlled-count experiment
    (users with fewer than held_out_max held-out candidates are left out of it)."""
    #: MovieLens ratings below the data folder (`simrec.datafiles.data_root`; "" skips the real data)
    ratings_file: str = "ml-latest-small/ratings.csv"
    min_rating: float = 4.0                       # positives are ratings >= min_rating ...
    min_item: int = 5                             # ... then items with >= min_item users
    train_fraction: float = 0.5                   # per-user training share of the interactions (rest: test)
    ease_l2s: tuple[float, ...] = tuple(float(x) for x in range(500, 1601, 10))  # EASE^R lambdas
    kunn_ks: tuple[int, ...] = tuple(range(70, 111, 5))  # KUNN neighbourhood sizes (both Ku and Ki)
    k: int = 100                                  # cutoff of DCG@k / nDCG@k
    #: the simulated world (truth q(u, i), P+ ~ Bernoulli(q))
    world: WorldConfig = field(default_factory=lambda: WorldConfig(n_users=1000, n_items=1500,
                                                                   offset=-4.5))
    #: mean of the per-user SRS rates rate_u ~ Beta (so |O+_u| varies between users, as in real data)
    observation_mean: float = 0.3
    observation_concentration: float = 4.0        # concentration of the Beta of the per-user SRS rates
    held_out_mean: int = 10                       # held-out size m (controlled counts)
    held_out_max: int = 40                        # largest held-out size n_max (controlled counts)
    spreads: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5)  # log-normal spreads s of held-out sizes

    def __post_init__(self):
        checked(validate.probability, "train_fraction", self.train_fraction, low_open=True, high_open=True)
        if not self.ease_l2s or any(not (math.isfinite(x) and x > 0) for x in self.ease_l2s):
            raise ValueError(f"ease_l2s must be non-empty and > 0, got {self.ease_l2s}")
        if not self.kunn_ks or any(k < 1 for k in self.kunn_ks):
            raise ValueError(f"kunn_ks must be non-empty integers >= 1, got {self.kunn_ks}")
        for name in ("ease_l2s", "kunn_ks"):
            if len(set(getattr(self, name))) != len(getattr(self, name)):
                raise ValueError(f"{name} must not repeat a value (each is one model), got "
                                 f"{getattr(self, name)}")
        if len(self.ease_l2s) + len(self.kunn_ks) ** 2 < 3:
            raise ValueError("need at least 3 models (ease_l2s and kunn_ks) for Kendall's tau")
        checked(validate.integer, "k", self.k, low=1)
        checked(validate.integer, "min_item", self.min_item, low=1)
        checked(validate.probability, "observation_mean", self.observation_mean, low_open=True, high_open=True)
        checked(validate.positive, "observation_concentration", self.observation_concentration)
        if not 1 <= self.held_out_mean <= self.held_out_max:
            raise ValueError(f"need 1 <= held_out_mean <= held_out_max, got {self.held_out_mean}, "
                             f"{self.held_out_max}")
        if not self.spreads or any(not (math.isfinite(s) and s >= 0) for s in self.spreads):
            raise ValueError(f"spreads must be non-empty, finite and >= 0, got {self.spreads}")

    @property
    def metric_specs(self) -> tuple[str, str]:
        return (f"dcg@{self.k}", f"ndcg@{self.k}")


PRESETS = {
    "smoke": DisagreementConfig(ratings_file="", ease_l2s=(50.0, 100.0, 200.0, 400.0),
                                kunn_ks=(5, 10), k=20,
                                world=WorldConfig(n_users=150, n_items=120, offset=-3.0),
                                held_out_mean=4, held_out_max=10, spreads=(0.0, 1.0)),
    "default": DisagreementConfig(),
    "paper": DisagreementConfig(world=WorldConfig(n_users=3000, n_items=3000, offset=-5.2)),
}


STUDY = Study(
    name="disagreement",
    description="Jeunen et al. App. A: DCG@100 and nDCG@100 disagree on the ordering of 192 EASE/"
                "KUNN models; in simulation, which one tracks the true utility, and how the "
                "disagreement grows with the variability of held-out counts",
    presets=PRESETS, cells=cells, setup=setup, compute=compute, report=report, columns=COLUMNS,
    data_files=lambda config: [config.ratings_file], expected_seconds={"smoke": 10, "default": 26, "paper": 450})
