"""Study ``protocols``: the ranking protocol decides the winner more than the metric does
(Steck, RecSys'13, Table 1).

Ratings are missing not at random: users rate what they like more often. Steck trains MF-RMSE
(observed ratings only) and AllRank (every missing rating imputed with a low value and a small
weight) and evaluates both by RMSE on the observed test ratings and by ranking metrics under
three protocols, set up as in his §3.3:

- (a1) all items and (a2) unrated items: the usual per-user random split of the observed ratings
  (`test_fraction` to test); each user ranks a random `n_unrated` (1,000) items without any
  rating (`simrec.missing.sample_unrated`) plus their rated test items, read at the top `n` (20);
  (a1) also ranks the user's training items, which are eligible there ("all items, including
  the items rated in the past", §3.1) and non-relevant (their ratings are not test data), while
  (a2) leaves them out. Steck's text says only "a random subset of 1,000 items without a rating,
  besides the rated items in the test set" for table (a); adding the training items to (a1) is
  our reading of what distinguishes (a1) from (a2).
- (b) rated test items: only users with >= `min_ratings` (20) ratings, `n_test` (10) random
  ratings of each to the test set and the rest to training (`simrec.missing.split_steck`; both
  models are trained again on this split); each user ranks their 10 test items, read at the top
  `n_b` (2, the top 20 %). Whole-list metrics (MAP, ATOP, nDCG) are the same under every protocol.

simrec adds what the paper cannot see: the same metrics on the complete ratings (every item the
user would rate 5 stars, rated or not, ranked among all items outside training, top `n`) and the
RMSE on all unrated pairs.

Averaging over users. Steck weights each user by their number of relevant test ratings (§3.3,
reporting that uniform weights changed little on Netflix); every metric is reported both ways
(`weighting`: "uniform", "relevant ratings"; the user weight under a protocol is the number of
relevant items among the user's candidates), and Steck's claims are judged under his weighting.
Beside each value stands the worst possible order of the user's candidates (relevant items
last, graded gains increasing: Steck's "worst" values), which shows how much of a metric's range
a protocol leaves (large for graded nDCG with imputed gains).

Fair comparison. Each model is tuned per data set on a validation split carved per user from
the (a) training ratings (`valid_fraction`): MF-RMSE's λ by validation RMSE, AllRank's λ and its
imputed rating r_m (`imputed_grid`; Steck tunes r_m) by validation nDCG@n (5-star validation
items ranked among all items outside the fitting part), over the log-spaced grids `mf_l2_grid` /
`allrank_l2_grid` (`simrec.models.select` flags a value at the edge of its grid). Each grid point
is trained with early stopping on its validation metric (one ALS sweep per check, patience 2,
`sweeps` the maximum); the selected point is refitted on the whole training split for the sweeps
of its best checkpoint, and the (b) models reuse it. A winner is named only beyond `z` (2)
standard errors of the paired difference: the evaluated test users are split into `parts` (5, as
Steck does for his SDs) disjoint random parts, the metric difference of the two models is
computed on each part, and SE = sd / sqrt(parts) (`simrec.reporting.paired_verdict`); otherwise
the verdict is a tie, and every count includes ties.

Calibration gate. Steck's reading of (b) rests on MF-RMSE being the better rating predictor on
the observed ratings (RMSE 0.88 vs 0.96 on Netflix). `table_calibration` checks it per data set
(MF-RMSE's RMSE on the (b) test ratings below AllRank's beyond `z` SE); a simulated cell that
fails it does not meet the condition of Steck's claim, and the report says so.

Real data: ml-latest-small as is, and its dense core (`dense_core`: the largest part in which
every user and every item has >= 20 ratings, `simrec.data.filter_min_counts`), closer to the
density of Steck's Netflix data. (a1) differs from (a2) only by the user's training items (our
reading of Steck's "all items"), so (a1) without them would be (a2).

Simulated explicit ratings. The world's true logit l(u, i) = a <x_u, y_i> + b_i + offset
(`simrec.world`) is mapped to stars by its quantiles over all pairs: r(u, i) = 1 + #{t : l(u, i)
> c_t}, with thresholds c_t at the cumulative shares `star_shares` (default 35/30/20/10/5 % for
1..5 stars, low ratings dominating the complete data as in Marlin & Zemel's random-sample
ratings). A pair is observed with probability min(observe_probability[r - 1] e_i, 1),
increasing in r (MNAR, Marlin & Zemel 2009; Steck 2010), times an item exposure e_i: e_i = 1 in
the "simulated" cell (being rated depends on the rating only), and e_i = exp(s z_i - s²/2),
z_i ~ N(0, 1) (mean 1, s = `exposure_sigma`) in the "simulated, item exposure" cell, where some
items are seen and rated far more than others whatever their ratings (same world, same
uniforms). The world has a 4-dimensional taste space (as `simrec.world`'s paper-like presets):
with about 30 ratings per user a 16-dimensional one left MF-RMSE barely better than a constant
predictor (observed-test RMSE 1.17 vs 1.21).

How the simulated world was chosen (a caveat, not a finding). The world, observe_probability and
the item exposure were chosen by probes until Steck's pattern appeared (probes at the default
sizes, seed 0, AllRank w_m = 0.005, untuned λ, the earlier protocols: every item in (a), all
test items at @20 in (b)). When being rated depends on the rating alone, "rated" is one more
signal of a high rating: AllRank learns it and it does not mislead it among rated items, so
AllRank won protocol (b) too — in the 16-dimensional world with observe_probability ratios p5/p1
of 40 and 300 and with log-normal item exposure s = 1 or 2 on top (there MF-RMSE, with
observed-test RMSE 1.09-1.17, was too weak to win anything), and in the 4-dimensional world
without exposure (AP under (b) 0.935 vs 0.910). With MAR observation (equal p_r) MF-RMSE won
every protocol, (b) included. Steck's pattern — AllRank ahead on (a1)/(a2), MF-RMSE ahead on
(b) — appeared once ratings were learnable (4-dim world) and rated-ness also depended on
something other than the rating (item exposure s = 1: MF-RMSE AP under (b) 0.927 vs 0.910;
s = 2: 0.936 vs 0.884). So the probes showed that the pattern can arise under untuned λ, and
under which observation process, not that it must; ml-latest-small is the cell nobody tuned.
With the models tuned, s = 1.15 is the spread at which MF-RMSE's RMSE on the (b) test ratings
beats AllRank's by Steck's Netflix margin (0.89 vs 0.98; his 0.88 vs 0.96): the default, chosen
by the calibration probe the README reports.

Relevant = 5-star ratings (Steck: "5-star ratings as relevant"). Binary metrics are simrec's
(tie-aware): P@N, R@N, MAP (= AP over the whole list), ATOP, nDCG@N and nDCG with binary gain,
N = `n` under (a) and the complete ratings and `n_b` under (b). Steck's multi-valued nDCG is
computed beside them ("graded nDCG@N", "graded nDCG"; `simrec.metrics.ndcg(..., gains=)`,
tie-aware): every ranked item carries the gain g(r) of its test rating, and a ranked item without
a test rating gets the imputed rating Y0 (`graded_imputed`, 2 stars, a low value like AllRank's
r_m), so (a1) and (a2) rank every candidate with a gain — training items count as missing in (a1),
as they are non-relevant there in the binary metrics. (b) ranks only rated test items, so nothing
is imputed; on the complete ratings every item has its true rating. The gain is linear,
g(r) = r (`graded_gain`; "exponential" gives 2^r - 1): the text of Steck's paper we work from lost
the DCG formula and the value of Y0, so both are choices, stated here and in the results.

The package: this module holds the config, its presets, the record schema and `STUDY`;
`compute.py` the simulated ratings, the splits, the tuned models and their metrics (cells, setup,
compute); `report.py` the tables, the claims (Steck's Table 1 beside ours), the figure and the
summary.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from simrec import validate
from simrec.config import ConfigError
from simrec.runner import Study
from simrec.world import WorldConfig
from simrec_studies.protocols.compute import (ALL_USERS, DENSE_CELL, EXPOSURE_CELL, GAINS, L2_GRID, METRICS,
                                              MODELS, OFFLINE, PROTOCOLS, REAL_DATA, WEIGHTINGS, WORST, Ratings,
                                              cells, compute, setup)
from simrec_studies.common.configs import checked
from simrec_studies.protocols.report import report

__all__ = ["ProtocolsConfig", "PRESETS", "COLUMNS", "STUDY", "MODELS", "PROTOCOLS", "OFFLINE", "METRICS",
           "EXPOSURE_CELL", "REAL_DATA", "DENSE_CELL", "WEIGHTINGS", "WORST", "ALL_USERS", "WorldConfig", "Ratings"]



@dataclass(frozen=True)
class ProtocolsConfig:
    """The simulated ratings, the splits, both models, their λ grids and the metrics (module
    docstring).

    AllRank's missing_weight is Steck's Netflix value, and its imputed rating r_m is tuned with λ
    over `imputed_grid` (Steck's Netflix value is 2). A probe over w_m in
    0.002..0.1 (untuned λ) found no degeneracy at these data sizes: in the 16-dimensional
    simulated world 0.005 gave AllRank its best AP, ATOP and nDCG under every protocol and its
    best observed-test RMSE; on ml-latest-small larger w_m raised (a1)/(a2) (AP under (a2) 0.12
    at 0.005, 0.19 at 0.05) without changing a winner."""
    #: MovieLens ratings below the data folder (`simrec.datafiles.data_root`; "" skips the real data)
    ratings_file: str = "ml-latest-small/ratings.csv"
    #: the simulated world (its true logit is cut into stars)
    world: WorldConfig = field(default_factory=lambda: WorldConfig(n_users=2000, n_items=1000,
                                                                   dim=4, offset=0.0))
    star_shares: tuple[float, ...] = (0.35, 0.30, 0.20, 0.10, 0.05)  # shares of 1..5 stars (complete)
    #: P(rated | r stars) for r = 1..5 (increasing: MNAR)
    observe_probability: tuple[float, ...] = (0.005, 0.01, 0.03, 0.08, 0.2)
    test_fraction: float = 0.2                    # (a) split: per-user test share of the ratings
    valid_fraction: float = 0.1                   # per-user validation share of the (a) training
    min_ratings: int = 20                         # (b) split: users with at least this many ratings
    n_test: int = 10                              # (b) split: test ratings per kept user
    n_unrated: int = 1000                         # (a): random unrated items ranked per user
    relevant_rating: float = 5.0                  # ratings >= this are relevant (5 stars)
    n: int = 20                                   # cutoff of P@N, R@N, nDCG@N under (a), complete
    n_b: int = 2                                  # cutoff under (b)
    dim: int = 20                                 # rank of both models
    mf_l2_grid: tuple[float, ...] = L2_GRID       # MF-RMSE's λ, selected by validation RMSE
    allrank_l2_grid: tuple[float, ...] = L2_GRID  # AllRank's λ, selected by validation nDCG@n
    #: AllRank's imputed rating r_m, tuned with λ (Steck §2.5: below the observed mean rating; 0, below
    #: the star scale, is AllRank's value on implicit data)
    imputed_grid: tuple[float, ...] = (0.0, 1.0, 2.0, 3.0)
    missing_weight: float = 0.005                 # AllRank's weight w_m of the imputed ratings
    sweeps: int = 20                              # maximum ALS sweeps (early stopping, patience 2)
    parts: int = 5                                # disjoint parts of the test users for the SE
    z: float = 2.0                                # a winner needs |difference| > z SE
    #: spread s of the item-exposure cell (0 drops it); 1.15 calibrates MF-RMSE's (b) RMSE to beat
    #: AllRank's by Steck's Netflix margin (0.08; the README's calibration probe)
    exposure_sigma: float = 1.15
    #: the dense real cell: the ml-latest-small core whose users and items all have >= this many
    #: ratings (0 drops it)
    dense_core: int = 20
    #: gain of the graded nDCG: "linear" g = r, "exponential" g = 2^r - 1
    graded_gain: str = "linear"
    graded_imputed: float = 2.0                   # rating Y0 of unrated items in the graded nDCG

    def __post_init__(self):
        if len(self.star_shares) != 5 or abs(sum(self.star_shares) - 1) > 1e-9:
            raise ConfigError(f"star_shares must be 5 positive shares summing to 1, got {self.star_shares}")
        checked(validate.numbers, "star_shares", self.star_shares, low=0, low_open=True)
        if len(self.observe_probability) != 5:
            raise ConfigError(f"observe_probability must be 5 probabilities in (0, 1], got "
                              f"{self.observe_probability}")
        checked(validate.numbers, "observe_probability", self.observe_probability, low=0, high=1, low_open=True)
        for name in ("test_fraction", "valid_fraction"):
            checked(validate.probability, name, getattr(self, name), low_open=True, high_open=True)
        for name in ("n", "n_b", "n_test", "n_unrated", "dim", "sweeps"):
            checked(validate.integer, name, getattr(self, name), low=1)
        if self.min_ratings <= self.n_test:
            raise ConfigError(f"min_ratings must exceed n_test (every (b) user keeps a training "
                              f"rating), got {self.min_ratings} <= {self.n_test}")
        if self.n_b > self.n_test:
            raise ConfigError(f"n_b must be <= n_test (the (b) list has n_test items), got "
                              f"{self.n_b} > {self.n_test}")
        checked(validate.integer, "parts (Steck splits the test set into five)", self.parts, low=5)
        checked(validate.positive, "z", self.z)
        for name in ("mf_l2_grid", "allrank_l2_grid"):
            grid = getattr(self, name)
            if not grid or len(set(grid)) != len(grid):
                raise ConfigError(f"{name} must be distinct finite values > 0 (log-spaced, e.g. "
                                  f"{L2_GRID}), got {grid}")
            checked(validate.numbers, name, grid, low=0, low_open=True)
        checked(validate.probability, "missing_weight", self.missing_weight, low_open=True)
        if not self.imputed_grid or len(set(self.imputed_grid)) != len(self.imputed_grid):
            raise ConfigError(f"imputed_grid must be distinct ratings (e.g. (1.0, 2.0, 3.0)), got {self.imputed_grid}")
        checked(validate.numbers, "imputed_grid", self.imputed_grid, low=0)
        checked(validate.integer, "dense_core (0 drops the dense cell)", self.dense_core, low=0)
        checked(validate.finite, "exposure_sigma (0 drops the exposure cell)", self.exposure_sigma, low=0)
        checked(validate.choice, "graded_gain", self.graded_gain, tuple(GAINS))
        checked(validate.finite, "graded_imputed", self.graded_imputed, low=0)

    def cutoff(self, protocol: str) -> int:
        """The N of P@N, R@N, nDCG@N under `protocol`."""
        return self.n_b if protocol == "b rated test items" else self.n

    @property
    def validation_metric(self) -> str:
        """AllRank's validation ranking metric (a `simrec.metrics.evaluate` name)."""
        return f"ndcg@{self.n}"


PRESETS = {
    "smoke": ProtocolsConfig(ratings_file="", world=WorldConfig(n_users=200, n_items=150, dim=4),
                             observe_probability=(0.02, 0.04, 0.1, 0.2, 0.4), min_ratings=10,
                             n_test=5, n_unrated=60, n=5, dim=5, missing_weight=0.2,
                             mf_l2_grid=(0.01, 0.1, 1.0), allrank_l2_grid=(0.01, 0.1, 1.0),
                             imputed_grid=(1.0, 2.0), sweeps=3),
    # a decade per step keeps the default run within its time budget; paper: the finer L2_GRID
    "default": ProtocolsConfig(mf_l2_grid=(0.001, 0.01, 0.1, 1.0, 10.0),
                               allrank_l2_grid=(0.001, 0.01, 0.1, 1.0, 10.0)),
    "paper": ProtocolsConfig(world=WorldConfig(n_users=10_000, n_items=3000, dim=4), dim=50,
                             sweeps=30),
}



#: the record schema (unused coordinates hold "", NaN or 0)
COLUMNS = {
    "data": str,            # the cell: "simulated" | "simulated, item exposure" | "ml-latest-small"
                            # | "ml-latest-small, dense core"
    "part": str,            # "model": a model's metric; "data": a data-set statistic;
                            # "tuning": one grid point of a model and its validation value
    "model": str,           # parts "model", "tuning": "MF-RMSE" | "AllRank"; part "model" also
                            # "worst order": the worst possible ranking of the candidates
    "protocol": str,        # part "model": a ranking protocol of `PROTOCOLS`, or for RMSE the pairs
                            # scored: "observed test" | "b rated test items" | "complete ratings"
                            # (every unrated pair); part "tuning": "validation"
    "weighting": str,       # ranking metrics: "uniform" (each user alike) | "relevant ratings"
                            # (Steck: each user weighted by their relevant test items); "" else
    "metric": str,          # part "model": "RMSE" or a label of `METRICS`; part "tuning":
                            # "RMSE" | "nDCG@n"; part "data": "users", "items", "train ratings",
                            # "test ratings", "relevant test ratings", "(b) users", "observed
                            # mean rating", "complete mean rating"
    "cutoff": int,          # N of an @N metric under its protocol (0: whole list, RMSE, data)
    "user_part": int,       # -1: over all test users; k >= 0: over the users of part k only
    "l2": float,            # parts "model", "tuning": the model's λ (NaN for "data", "worst order")
    "imputed": float,       # parts "model", "tuning": AllRank's imputed rating r_m (NaN otherwise)
    "sweeps": int,          # parts "model", "tuning": ALS sweeps (best checkpoint); 0 otherwise
    "value": float,         # RMSE, the (weighted) user mean of the metric, the statistic, or
                            # the validation value
    "se": float,            # standard error of the all-user mean (NaN for RMSE, parts, statistics)
}


STUDY = Study(
    name="protocols",
    description="Steck RecSys'13 Table 1: MF-RMSE vs AllRank (λ tuned on validation) under MNAR "
                "ratings; does the ranking protocol (all items / unrated items / rated test "
                "items) decide the noise-aware winner more than the metric, and which protocol "
                "gives the complete-ratings verdict?",
    presets=PRESETS, cells=cells, setup=setup, compute=compute, report=report, columns=COLUMNS,
    data_files=lambda config: [config.ratings_file], expected_seconds={"smoke": 15, "default": 80, "paper": 5400})

