"""Study ``coat``: which offline protocol orders models as a missing-at-random truth does?

Steck (RecSys'13, "Evaluation of recommendations: rating-prediction and ranking") showed that the
ranking protocol — rank all items, rank the unrated items, or rank only the rated test items —
can decide which model wins when ratings are missing not at random (MNAR), and argued for the
protocols that rank unrated items. Simulation (`protocols`) can only say which protocol is right
in the world it simulates. The Coat shopping data (Schnabel, Swaminathan, Singh, Chandak,
Joachims, ICML'16, "Recommendations as treatments: debiasing learning and evaluation") can say it
on real people: each of its 290 users rated 24 coats they chose (MNAR) and 16 coats drawn for them
uniformly at random (missing completely at random, MCAR). On the MCAR ratings a metric is an
unbiased sample of what the user thinks of the items, so the model ordering they give is the
truth an offline protocol should reproduce.

Design. Per random split (`splits`, each from its own key), the MNAR ratings of every user are cut
into `n_test` held-out ratings, `n_valid` validation ratings and the rest (train), uniformly at
random (`simrec.missing.split_steck` twice). Six models are trained on the train part: MF-RMSE and
AllRank on the ratings (Steck's two; AllRank imputes `imputed` stars with weight w_m on every
unrated pair; MF-RMSE with a user and an item bias beside the global offset when
`mf_rmse_biases`, as rating predictors are usually fitted: without them, Steck's Eq. 11, its
validation RMSE on Coat, 1.21–1.25 over the ten splits, is no better than the items' mean
ratings', about 1.24, and with them it is 1.11–1.16, `table_selected`), popularity, iALS, EASE and MF-ADG (Lim et al., RecSys'15) on the positives
(ratings >= `relevant_rating`). Each hyper-parameter grid point is fitted with early stopping on
its validation metric (MF-RMSE: validation RMSE; the others: validation nDCG (whole list) of the positive
validation ratings ranked among every item outside train), `simrec.models.select` picks the
point (and flags a value at the edge of its grid), and the selected point is refitted on train +
validation (the "fit" part) for the budget of its best checkpoint (ALS sweeps; MF-ADG epochs).
Every protocol below evaluates these six fitted models, so the protocols disagree only in how
they measure.

Protocols (relevant = rating >= `relevant_rating`, 4 stars; metrics tie-aware, `simrec.metrics`):

- (a1) all items: rank all 300 coats; relevant = the held-out MNAR ratings >= 4; fit items stay
  in the list as non-relevant;
- (a2) unrated items: the same without the fit items;
- (b) rated held-out items: rank only the user's `n_test` held-out MNAR items;
- (a1)/(a2) with IPS: the inverse-propensity-scored DCG of Schnabel et al. (§3.2): a held-out
  relevant item i of user u contributes its rank discount times 1 / P(held out), P = p_ui n_test
  / n_u with p_ui the shipped propensity of (u, i) being rated and n_u the user's MNAR ratings
  (`simrec.metrics.dcg(..., gains=)`). Unbiased for the user's DCG over every relevant coat if
  the propensities are right, and only for metrics that are sums over items (DCG@N, DCG): nDCG,
  P@N, R@N, MAP and ATOP normalise by or rank against the observed set, which IPS does not
  correct;
- the truth, MCAR: the same metrics with relevant = the MCAR ratings >= 4, ranking all coats
  outside the fit part; and beside it, ranking only the user's random coats outside the fit part.

Cutoffs. N = `cutoff` (5) for lists over the catalogue: about 3 of a user's 16 MCAR ratings are
relevant (and 6.6 of the 24 MNAR ones), so a top 5 of 300 is a short page that those few items
can fill, while a top 10 or 20 would hold mostly unlabelled coats. Lists of rated items only are
short (8 held-out items under (b), 16 MCAR items), so there N = round(`short_share` x length),
the top 20 % as in Steck's (b) (2 of 10): 2 of 8 and 3 of 16. Whole-list metrics (nDCG, MAP,
ATOP, DCG) need no cutoff.

Agreement. For each protocol x metric and each MCAR truth, Kendall's tau-b
(`simrec.stats.kendall_tau`) between the six models' user-mean values and their truth values of
the same metric, with a percentile bootstrap interval at `level`: users resampled with
replacement `bootstrap` times (one fixed key per cell, the same resample for every model,
protocol and truth). The headline τ pools the splits first: a last cell (split `POOLED` = -1)
evaluates every split's refitted models again (their fits come from the store of fits) and
averages each model's per-user values over the splits before τ; τ of a single split, and its
mean over the splits, are kept beside it. Averaging τ instead would let each split's refitting
noise, which swaps close models, pull the mean towards 0. And noise-aware
inversions: a pair of models is inverted only when the protocol and the truth both name a winner
beyond `z` standard errors of the paired difference, over `parts` disjoint parts of the users
(`simrec.stats.user_parts`, `simrec.reporting.paired_verdict`), and the winners differ. Which
protocol to trust, against each truth: the unweighted protocol (a1, a2, b) with the highest
pooled τ averaged over the metrics, and its lead over each other one with a paired bootstrap
interval (the same user resamples for every protocol; a lead is significant when the interval
excludes 0). Steck's argument for (a) over (b) is the claim, against each truth: the leads of
(a1) and (a2) over (b).

Grids. On Coat MF-ADG's validation optimum lies near λ 0.3..3 with learning rate 0.3..3 (over ten
splits the rate 0.3 was chosen four times when it ended the grid, and then 0.1 twice when the grid
ended there: it now reaches 0.03; λ >= 1
leaves mostly the item biases, a popularity-like model: larger λ is a plateau, not an optimum),
and iALS's near λ 1..3 with w0 1e-3..1e-1 (at λ >= 3 the factors shrink to the leading direction
and w0 hardly matters). The validation metric rests on about one relevant validation rating per
user, so the validation metric is nDCG over the whole list (every validation positive's rank
counts); with nDCG@5 neighbouring grid points were within noise of each other and the selected
point moved to whichever grid edge was widened. The selected-hyperparameter table flags every
edge.

The package: this module holds the config, its presets, the record schema and `STUDY`;
`compute.py` the splits, the tuned and refitted models, the protocols and the agreement
statistics (cells, setup, compute); `report.py` the tables, the claim, the figure and the summary.
"""
from __future__ import annotations

from dataclasses import dataclass

from simrec import validate
from simrec.config import ConfigError
from simrec.runner import Study
from simrec_studies.coat.compute import (A1, A1_IPS, A2, A2_IPS, ALL_USERS, B, EXPLICIT, IPS_METRICS, L2_GRID,
                                         MEAN_TAU, METRICS, MODELS, OFFLINE, POOLED, PROTOCOLS, TRUTH, TRUTH_RANDOM,
                                         UNWEIGHTED, WEIGHT_GRID, Split, cells, compute, data_files, setup)
from simrec_studies.coat.report import report
from simrec_studies.common.configs import checked

__all__ = ["CoatConfig", "PRESETS", "COLUMNS", "STUDY", "MODELS", "EXPLICIT", "OFFLINE", "UNWEIGHTED", "PROTOCOLS",
           "METRICS", "IPS_METRICS", "TRUTH", "TRUTH_RANDOM", "MEAN_TAU", "ALL_USERS", "POOLED", "A1", "A2", "B",
           "A1_IPS", "A2_IPS", "Split"]


@dataclass(frozen=True)
class CoatConfig:
    """The splits, the six models and their grids, the protocols' cutoffs and the agreement
    statistics (module docstring)."""
    #: the Coat folder below the data folder (`simrec.datafiles.data_root`; "" skips the study)
    folder: str = "coat"
    splits: int = 10                              # random MNAR held-out splits (one cell each)
    n_test: int = 8                               # MNAR ratings per user held out for testing
    n_valid: int = 4                              # MNAR ratings per user for validation (of the rest)
    relevant_rating: float = 4.0                  # ratings >= this are relevant (positives)
    cutoff: int = 5                               # N of P@N, R@N, nDCG@N, DCG@N over the catalogue
    short_share: float = 0.2                      # N = round(share x length) for rated-only lists
    dim: int = 10                                 # rank of every factor model
    sweeps: int = 30                              # maximum ALS sweeps (early stopping)
    pairs: int = 400_000                          # maximum sampled (u, i+) pairs of MF-ADG
    check_pairs: int = 10_000                     # MF-ADG early-stopping check every this many pairs
    patience: int = 3                             # checks without improvement before stopping
    gamma: float = 10.0                           # OPT-ADG γ: at most (I - 1) / γ negative draws
    batch_size: int = 256                         # MF-ADG pairs per step
    mf_rmse_l2s: tuple[float, ...] = L2_GRID      # MF-RMSE's λ grid (validation RMSE)
    mf_rmse_biases: bool = True                   # MF-RMSE with user and item biases (else r₀ only)
    allrank_l2s: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0)     # AllRank's λ grid
    allrank_weights: tuple[float, ...] = WEIGHT_GRID  # AllRank's w_m grid of the imputed ratings
    imputed: float = 2.0                          # AllRank's imputed rating r_m (Steck)
    ials_l2s: tuple[float, ...] = (0.3, 1.0, 3.0, 10.0)         # iALS λ grid
    ials_weights: tuple[float, ...] = (0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3)  # iALS w0 of unobserved pairs
    ease_l2s: tuple[float, ...] = (1.0, 10.0, 100.0, 1000.0, 10_000.0, 100_000.0, 1e6, 1e7)  # EASE λ grid
    adg_l2s: tuple[float, ...] = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0)     # MF-ADG λ grid
    adg_learning_rates: tuple[float, ...] = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0)  # MF-ADG adagrad step grid
    parts: int = 5                                # disjoint user parts for the paired SE
    z: float = 2.0                                # a winner needs |difference| > z SE
    bootstrap: int = 500                          # user resamples for the CI of Kendall's τ
    level: float = 0.95                           # level of that percentile interval

    def __post_init__(self):
        for name in ("splits", "n_test", "n_valid", "cutoff", "dim", "sweeps", "pairs",
                     "check_pairs", "patience", "batch_size", "bootstrap"):
            checked(validate.integer, name, getattr(self, name), low=1)
        checked(validate.integer, "parts (Steck's five parts of the test users)", self.parts, low=5)
        for name in ("relevant_rating", "imputed"):
            checked(validate.finite, name, getattr(self, name), low=1, high=5)
        for name in ("short_share", "level"):
            checked(validate.probability, name, getattr(self, name), low_open=True, high_open=True)
        for name in ("gamma", "z"):
            checked(validate.positive, name, getattr(self, name))
        for name in ("mf_rmse_l2s", "allrank_l2s", "allrank_weights", "ials_l2s", "ials_weights",
                     "ease_l2s", "adg_l2s", "adg_learning_rates"):
            grid = getattr(self, name)
            if not grid or len(set(grid)) != len(grid):
                raise ConfigError(f"{name} must be distinct finite values > 0 (log-spaced, e.g. "
                                  f"{L2_GRID}), got {grid}")
            checked(validate.numbers, name, grid, low=0, low_open=True, high=1 if name == "allrank_weights" else None)

    def short_cutoff(self, length: float) -> int:
        """The N of P@N, R@N, nDCG@N, DCG@N on a list of `length` rated items (module docstring)."""
        return max(1, round(self.short_share * length))

    @property
    def validation_metric(self) -> str:
        """The ranking models' validation metric (a `simrec.metrics.evaluate` name): nDCG over
        the whole list, which uses the rank of every validation positive; with about one relevant
        validation rating per user a top-N cutoff makes it too noisy to tell grid points apart."""
        return "ndcg"


PRESETS = {
    "smoke": CoatConfig(splits=1, n_test=4, n_valid=2, dim=3, sweeps=4, pairs=4000,
                        check_pairs=1000, batch_size=64, mf_rmse_l2s=(0.01, 0.1, 1.0),
                        allrank_l2s=(0.1, 1.0), allrank_weights=(0.01, 0.1),
                        ials_l2s=(0.1, 1.0), ials_weights=(0.1,), ease_l2s=(10.0, 100.0),
                        adg_l2s=(0.01, 0.1), adg_learning_rates=(0.1,), bootstrap=50),
    "default": CoatConfig(),
    "paper": CoatConfig(splits=20, dim=20, sweeps=50, pairs=1_000_000, bootstrap=2000),
}



#: the record schema (unused coordinates hold "", NaN or -1)
COLUMNS = {
    "split": int,           # the random MNAR split; -1: every split, values pooled (`POOLED`)
    "part": str,            # "model": a model's metric; "tuning": a grid point's validation value;
                            # "selected": the chosen point; "agreement": Kendall's τ; "data": a size;
                            # "bootstrap": a resample's τ vs an MCAR truth, mean over the metrics
    "model": str,           # `MODELS` ("" for "agreement" and "data")
    "protocol": str,        # `PROTOCOLS` ("model", "agreement"); "" otherwise
    "truth": str,           # parts "agreement", "bootstrap": the MCAR protocol compared with
    "metric": str,          # a label of `METRICS`; "validation RMSE" / "validation nDCG"
                            # (tuning, selected); a data size name (data)
    "cutoff": int,          # N of the @N metrics under the protocol (0 where none)
    "user_part": int,       # part "model": the disjoint user part 0..parts-1, or -1 = all users;
                            # part "bootstrap": the user resample 0..bootstrap-1
    "value": float,         # user mean, validation value, τ or size
    "se": float,            # part "model", all users: standard error of the user mean
    "low": float,           # part "agreement": the bootstrap interval of τ
    "high": float,
    "point": str,           # parts "tuning", "selected": the grid point, e.g. "l2=0.1, wm=0.01"
    "budget": int,          # best checkpoint's sweeps / MF-ADG pairs (0 without early stopping)
    "edges": str,           # part "selected": hyper-parameters at the edge of their grid
    "unsearched": str,      # part "selected": hyper-parameters with < 3 grid values (no edge test)
}


STUDY = Study(
    name="coat",
    description="Coat (Schnabel et al. ICML'16): which offline protocol (all items, unrated "
                "items, rated held-out items, IPS) orders six models as the missing-at-random "
                "ratings do — Steck's question answered on real MNAR/MCAR data",
    presets=PRESETS, cells=cells, setup=setup, compute=compute, report=report, columns=COLUMNS,
    data_files=data_files, expected_seconds={"smoke": 30, "default": 60, "paper": 1800})

