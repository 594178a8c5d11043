"""Study ``protocols``: the ranking protocol decides the winner more than the metric does
(Steck, RecSys'13, Table 1).

Ratings are missing not at random: users rate what they like more often. Steck trains MF-RMSE
(observed ratings only) and AllRank (every missing rating imputed with a low value and a small
weight) and evaluates both by RMSE on the observed test ratings and by ranking metrics under
three protocols: (a1) rank all items, (a2) rank the items the user has not rated in training,
(b) rank only the user's rated test items. AllRank wins (a1)/(a2), MF-RMSE wins (b), whatever the
metric. simrec adds what the paper cannot see: the same metrics on the complete ratings (every
item the user would rate 5 stars, rated or not, ranked among all items outside training) and
the RMSE on all unrated pairs.

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
Observed ratings are split per user into train and test.

Why two simulated cells (a probe at the default sizes, seed 0, AllRank w_m = 0.005). When being
rated depends on the rating alone, "rated" is one more signal of a high rating: AllRank learns
it and it does not mislead it among rated items, so AllRank won protocol (b) too — in the
16-dimensional world with observe_probability ratios p5/p1 of 40 and 300 and with log-normal
item exposure s = 1 or 2 on top (there MF-RMSE, with observed-test RMSE 1.09-1.17, was too weak
to win anything), and in the 4-dimensional world without exposure (AP under (b) 0.935 vs 0.910).
With MAR observation (equal p_r) MF-RMSE won every protocol, (b) included. Steck's pattern —
AllRank ahead on (a1)/(a2), MF-RMSE ahead on (b) — appeared once ratings were learnable (4-dim
world) and rated-ness also depended on something other than the rating (item exposure s = 1:
MF-RMSE AP under (b) 0.927 vs 0.910; s = 2: 0.936 vs 0.884).

Relevant = 5-star ratings (Steck: "5-star ratings as relevant"). Binary metrics are simrec's
(tie-aware): P@20, R@20, MAP (= AP over the whole list), ATOP, nDCG@20 and nDCG with binary gain.
Steck's multi-valued nDCG is computed beside them ("graded ndcg@20", "graded ndcg";
`simrec.metrics.ndcg(..., gains=)`, tie-aware): every ranked item carries the gain g(r) of its
test rating, and a ranked item without a test rating gets the imputed rating Y0 (`graded_imputed`,
2 stars: the low value AllRank imputes too), so (a1) and (a2) rank every item with a gain —
training items count as missing in (a1), as they are non-relevant there in the binary metrics.
(b) ranks only rated test items, so nothing is imputed; on the complete ratings every item has
its true rating. The gain is linear, g(r) = r (`graded_gain`; "exponential" gives 2^r - 1):
the text of Steck's paper we work from lost the DCG formula and the value of Y0, so both are
choices, stated here and in the results.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from collections.abc import Mapping

import jax
import numpy as np
import pandas as pd
import scipy.sparse as sp

from simrec import data, metrics, missing, models
from simrec.runner import Report, Study, cell_key, shared_key
from simrec.world import WorldConfig, make_world, quality_logit, user_blocks
from simrec_studies._data import real_data_file, skipped_note

MODELS = ("MF-RMSE", "AllRank")
EXPOSURE_CELL = "simulated, item exposure"
REAL_DATA = "ml-latest-small"
#: gain functions of the graded nDCG, rating -> gain
GAINS = {"linear": lambda r: r, "exponential": lambda r: 2.0 ** r - 1.0}
PROTOCOLS = ("a1 all items", "a2 unrated items", "b rated test items", "complete ratings")
OFFLINE = PROTOCOLS[:3]


@dataclass(frozen=True)
class ProtocolsConfig:
    """The simulated ratings, the split, both models and the metrics (module docstring).

    AllRank's allrank_l2, imputed and missing_weight are Steck's Netflix values (λ needs no
    rescaling: the ridge is λ times each row's total weight). A probe over w_m in 0.002..0.1 found
    no degeneracy at these data sizes: in the simulated cell (16-dimensional world) 0.005 gave
    AllRank its best AP, ATOP and nDCG under every protocol and its best observed-test RMSE; on
    ml-latest-small larger w_m raised (a1)/(a2) (AP under (a2) 0.12 at 0.005, 0.19 at 0.05)
    without changing a winner."""
    #: MovieLens ratings below the data folder (`simrec_studies._data.data_root`; "" skips the real data)
    ratings_file: str = "ml-latest-small/ratings.csv"
    #: the simulated world (its true logit is cut into stars)
    world: WorldConfig = field(default_factory=lambda: WorldConfig(n_users=2000, n_items=1000,
                                                                   dim=4, offset=0.0))
    star_shares: tuple[float, ...] = (0.35, 0.30, 0.20, 0.10, 0.05)  # shares of 1..5 stars (complete)
    #: P(rated | r stars) for r = 1..5 (increasing: MNAR)
    observe_probability: tuple[float, ...] = (0.005, 0.01, 0.03, 0.08, 0.2)
    test_fraction: float = 0.2                    # per-user test share of the observed ratings
    relevant_rating: float = 5.0                  # ratings >= this are relevant (5 stars)
    n: int = 20                                   # cutoff of P@n, R@n, nDCG@n
    dim: int = 50                                 # rank of both models
    mf_l2: float = 0.07                           # MF-RMSE's lambda
    allrank_l2: float = 0.04                      # AllRank's lambda
    imputed: float = 2.0                          # AllRank's imputed rating r_m
    missing_weight: float = 0.005                 # AllRank's weight w_m of the imputed ratings
    exposure_sigma: float = 1.0                   # spread s of the item-exposure cell (0 drops it)
    #: gain of the graded nDCG: "linear" g = r, "exponential" g = 2^r - 1
    graded_gain: str = "linear"
    graded_imputed: float = 2.0                   # rating Y0 of unrated items in the graded nDCG
    sweeps: int = 10                              # ALS sweeps of both models

    def __post_init__(self):
        if len(self.star_shares) != 5 or any(s <= 0 for s in self.star_shares) \
                or abs(sum(self.star_shares) - 1) > 1e-9:
            raise ValueError(f"star_shares must be 5 positive shares summing to 1, got "
                             f"{self.star_shares}")
        if len(self.observe_probability) != 5 or any(not 0 < p <= 1
                                                      for p in self.observe_probability):
            raise ValueError(f"observe_probability must be 5 probabilities in (0, 1], got "
                             f"{self.observe_probability}")
        if not 0 < self.test_fraction < 1:
            raise ValueError(f"test_fraction must be in (0, 1), got {self.test_fraction}")
        for name in ("n", "dim", "sweeps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("mf_l2", "allrank_l2"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise ValueError(f"{name} must be finite and > 0, got {getattr(self, name)}")
        if not 0 < self.missing_weight <= 1:
            raise ValueError(f"missing_weight must be in (0, 1], got {self.missing_weight}")
        if not (math.isfinite(self.exposure_sigma) and self.exposure_sigma >= 0):
            raise ValueError(f"exposure_sigma must be finite and >= 0 (0 drops the exposure "
                             f"cell), got {self.exposure_sigma}")
        if self.graded_gain not in GAINS:
            raise ValueError(f"graded_gain must be one of {sorted(GAINS)}, got "
                             f"{self.graded_gain!r}")
        if not (math.isfinite(self.graded_imputed) and self.graded_imputed >= 0):
            raise ValueError(f"graded_imputed must be a finite rating >= 0, got "
                             f"{self.graded_imputed}")

    @property
    def metric_specs(self) -> tuple[str, ...]:
        """The binary metrics (`simrec.metrics.evaluate` names)."""
        return (f"precision@{self.n}", f"recall@{self.n}", "ap", "atop", f"ndcg@{self.n}", "ndcg")

    @property
    def graded_specs(self) -> dict[str, int | None]:
        """The graded nDCG metrics: {name: cutoff}."""
        return {f"graded ndcg@{self.n}": self.n, "graded ndcg": None}

    @property
    def all_specs(self) -> tuple[str, ...]:
        return (*self.metric_specs, *self.graded_specs)


PRESETS = {
    "smoke": ProtocolsConfig(ratings_file="", world=WorldConfig(n_users=200, n_items=150, dim=4),
                             observe_probability=(0.02, 0.04, 0.1, 0.2, 0.4), n=5, dim=5,
                             missing_weight=0.2, sweeps=3),
    "default": ProtocolsConfig(),
    "paper": ProtocolsConfig(world=WorldConfig(n_users=10_000, n_items=3000, dim=4), dim=50,
                             sweeps=15),
}


# ---- data (setup) ---------------------------------------------------------------------------

def _item_exposure(key, n_items: int, sigma: float) -> np.ndarray:
    """e_i = exp(sigma z_i - sigma²/2), z_i ~ N(0, 1): log-normal with mean 1.  f64[I]."""
    z = np.asarray(jax.random.normal(shared_key(key, "exposure"), (n_items,)), np.float64)
    return np.exp(sigma * z - sigma ** 2 / 2)


def _stars(key, config: ProtocolsConfig) -> np.ndarray:
    """The complete ratings: the world's true logit cut at its `star_shares` quantiles.
    f32[U, I] in 1..5."""
    world = make_world(shared_key(key, "world"), config.world)
    logit = np.concatenate([np.asarray(quality_logit(world, users))
                            for users in user_blocks(world.n_users, 512)])
    thresholds = np.quantile(logit, np.cumsum(config.star_shares)[:-1])
    return 1 + (logit[..., None] > thresholds).sum(-1).astype(np.float32)


def _observe(key, config: ProtocolsConfig, stars: np.ndarray,
             exposure_sigma: float = 0.0) -> sp.csr_matrix:
    """Observed ratings CSR [U, I]: P(observed) = min(observe_probability[r - 1] e_i, 1) with
    e = `_item_exposure` (1 when exposure_sigma = 0); the same uniforms for every sigma."""
    probability = np.asarray(config.observe_probability)[stars.astype(int) - 1]
    if exposure_sigma > 0:
        probability = np.minimum(probability * _item_exposure(key, stars.shape[1], exposure_sigma), 1)
    uniforms = np.asarray(jax.random.uniform(shared_key(key, "observe"), stars.shape))
    return sp.csr_matrix(np.where(uniforms < probability, stars, 0.0))


def _movielens(config: ProtocolsConfig) -> sp.csr_matrix:
    raw = data.load_interactions(real_data_file(config.ratings_file))
    return data.filter_min_counts(raw, min_user=1, min_item=1).ratings


def _split(key, ratings: sp.csr_matrix, test_fraction: float):
    """Per-user random split of the observed ratings: (train CSR, test CSR), ratings kept."""
    split = missing.split_per_user(key, ratings.astype(bool), (1 - test_fraction, 0.0,
                                                              test_fraction), n_folds=1)[0]
    return ratings.multiply(split.train).tocsr(), ratings.multiply(split.test).tocsr()


@dataclass(frozen=True)
class Ratings:
    """One cell's data: observed ratings split per user, and the complete ratings if known."""
    observed: sp.csr_matrix                           # f[U, I], observed stars (0 = unrated)
    train: sp.csr_matrix                              # f[U, I], the training part of observed
    test: sp.csr_matrix                               # f[U, I], the test part of observed
    stars: np.ndarray | None                          # f32[U, I] complete stars (simulated only)


@dataclass(frozen=True)
class Shared:
    """Every cell's ratings, by the cell's ``data`` name."""
    ratings: Mapping[str, Ratings]


def cells(config: ProtocolsConfig) -> list[dict]:
    out = [{"data": "simulated"}]
    if config.exposure_sigma > 0:
        out.append({"data": EXPOSURE_CELL})
    if real_data_file(config.ratings_file):
        out.append({"data": REAL_DATA})
    return out


def setup(key, config: ProtocolsConfig) -> Shared:
    """The simulated complete ratings (one world for both simulated cells), every cell's observed
    ratings and its split, drawn with ``fold_in(cell_key(key, cell), 0)``."""
    out, stars = {}, None
    for cell in cells(config):
        if cell["data"] in ("simulated", EXPOSURE_CELL):
            stars = _stars(key, config) if stars is None else stars
            sigma = config.exposure_sigma if cell["data"] == EXPOSURE_CELL else 0.0
            observed, complete = _observe(key, config, stars, sigma), stars
        else:
            observed, complete = _movielens(config), None
        train, test = _split(jax.random.fold_in(cell_key(key, cell), 0), observed,
                             config.test_fraction)
        out[cell["data"]] = Ratings(observed=observed, train=train, test=test, stars=complete)
    return Shared(ratings=out)


# ---- models and metrics ---------------------------------------------------------------------

def _model_specs(config: ProtocolsConfig) -> dict[str, models.Spec]:
    """{name: spec} of `MODELS`: MF-RMSE and AllRank at the configured rank, ridge and sweeps."""
    return {"MF-RMSE": models.MFRMSESpec(dim=config.dim, l2=config.mf_l2, sweeps=config.sweeps),
            "AllRank": models.AllRankSpec(dim=config.dim, l2=config.allrank_l2,
                                          imputed=config.imputed,
                                          missing_weight=config.missing_weight,
                                          sweeps=config.sweeps)}


def _unrated_in_test(test: sp.csr_matrix) -> np.ndarray:
    """Protocol (b)'s exclusion: every item without a test rating, bool[U, I]; a user without
    test ratings keeps every item (nothing of theirs is relevant, so their metrics are NaN and
    skipped, while excluding every item would make the ranking undefined)."""
    rated = test.astype(bool)
    return ~rated.toarray() & (np.diff(rated.indptr) > 0)[:, None]


def _graded_settings(config: ProtocolsConfig, train_mask, test: sp.csr_matrix, stars):
    """{protocol: (relevant, exclude, gains f64[U, I])} of the graded nDCG (module docstring)."""
    gain = GAINS[config.graded_gain]
    imputed = np.full(test.shape, gain(config.graded_imputed))
    rows = np.repeat(np.arange(test.shape[0]), np.diff(test.indptr))
    imputed[rows, test.indices] = gain(test.data)
    everything = np.ones(test.shape, bool)
    out = {"a1 all items": (everything, None, imputed),
           "a2 unrated items": (everything, train_mask, imputed),
           "b rated test items": (test.astype(bool), _unrated_in_test(test), imputed)}
    if stars is not None:
        out["complete ratings"] = (everything, train_mask, gain(stars.astype(np.float64)))
    return out


def _rmse(model, pairs: sp.csr_matrix, targets: np.ndarray) -> float:
    rows = np.repeat(np.arange(pairs.shape[0]), np.diff(pairs.indptr))
    prediction = np.asarray(models.score(model, np.arange(pairs.shape[0])))[rows, pairs.indices]
    return float(np.sqrt(np.mean((prediction - targets) ** 2)))


#: the record schema (unused coordinates hold "" or NaN)
COLUMNS = {
    "data": str,            # the cell: "simulated" | "simulated, item exposure" | "ml-latest-small"
    "part": str,            # "model": a model's metric under a protocol; "data": a data-set statistic
    "model": str,           # part "model": "MF-RMSE" | "AllRank"
    "protocol": str,        # part "model": a ranking protocol of `PROTOCOLS`, or for RMSE the pairs
                            # scored: "observed test" | "complete ratings" (every unrated pair)
    "metric": str,          # part "model": "RMSE" or a metric of `ProtocolsConfig.all_specs`;
                            # part "data": "users", "items", "train ratings", "test ratings",
                            # "relevant test ratings", "observed mean rating", "complete mean rating"
    "value": float,         # RMSE, the user mean of the metric, or the statistic
    "se": float,            # standard error of the user mean (NaN for RMSE and statistics)
}


def _record(cell: dict, part: str, metric: str, value, se=math.nan, *, model: str = "",
            protocol: str = "") -> dict:
    return {"data": cell["data"], "part": part, "model": model, "protocol": protocol,
            "metric": metric, "value": float(value), "se": float(se)}


def compute(key, config: ProtocolsConfig, cell: dict, shared: Shared) -> list[dict]:
    """Per model: RMSE on observed test ratings (and, simulated, on every unrated pair) and the
    ranking metrics under each protocol (user means and standard errors); plus the data sizes."""
    ratings = shared.ratings[cell["data"]]
    train, test, stars = ratings.train, ratings.test, ratings.stars
    train_mask = train.astype(bool)
    relevant_test = sp.csr_matrix(test.multiply(test >= config.relevant_rating)).astype(bool)
    settings = {"a1 all items": (relevant_test, None),
                "a2 unrated items": (relevant_test, train_mask),
                "b rated test items": (relevant_test, _unrated_in_test(test))}
    sizes = {"users": ratings.observed.shape[0], "items": ratings.observed.shape[1],
             "train ratings": train.nnz, "test ratings": test.nnz,
             "relevant test ratings": relevant_test.nnz,
             "observed mean rating": ratings.observed.data.mean()}
    if stars is not None:
        settings["complete ratings"] = (sp.csr_matrix(stars >= config.relevant_rating), train_mask)
        sizes["complete mean rating"] = stars.mean()
    out = [_record(cell, "data", metric, value) for metric, value in sizes.items()]
    graded = _graded_settings(config, train_mask, test, stars)
    fit_key = jax.random.fold_in(cell_key(key, cell), 1)            # the same start for both
    for name, spec in _model_specs(config).items():
        model = models.fit(fit_key, spec, train)
        score = functools.partial(models.score, model)
        out.append(_record(cell, "model", "RMSE", _rmse(model, test, test.data), model=name,
                           protocol="observed test"))
        if stars is not None:
            unrated = sp.csr_matrix(~train_mask.toarray())
            rows = np.repeat(np.arange(unrated.shape[0]), np.diff(unrated.indptr))
            rmse = _rmse(model, unrated, stars[rows, unrated.indices])
            out.append(_record(cell, "model", "RMSE", rmse, model=name, protocol="complete ratings"))
        for protocol, (relevant, exclude) in settings.items():
            values = metrics.evaluate(score, relevant, exclude=exclude, metrics=config.metric_specs)
            out += [_record(cell, "model", metric, *metrics.mean_and_se(v), model=name,
                            protocol=protocol) for metric, v in values.items()]
            relevant, exclude, gains = graded[protocol]
            out += [_record(cell, "model", metric, *metrics.mean_and_se(
                        metrics.ndcg(score, relevant, k=k, exclude=exclude, gains=gains)),
                        model=name, protocol=protocol)
                    for metric, k in config.graded_specs.items()]
    return out


# ---- report ---------------------------------------------------------------------------------

def _rows(config, records: pd.DataFrame) -> pd.DataFrame:
    """One row per (data, protocol, metric): both models' values and SEs, the winner and z."""
    rows = []
    for data_name, part in records[records.part == "model"].groupby("data", sort=False):
        value = {(r.model, r.protocol, r.metric): (r.value, r.se) for r in part.itertuples()}
        for protocol in ("observed test", "complete ratings"):
            if ("MF-RMSE", protocol, "RMSE") in value:
                a, b = (value[m, protocol, "RMSE"][0] for m in MODELS)
                rows.append({"data": data_name, "protocol": protocol, "metric": "RMSE",
                             "MF-RMSE": a, "AllRank": b, "se MF-RMSE": np.nan,
                             "se AllRank": np.nan, "winner": _winner(b - a, a - b), "z": np.nan})
        for protocol in PROTOCOLS:
            for spec in config.all_specs:
                if ("MF-RMSE", protocol, spec) not in value:
                    continue
                (a, sa), (b, sb) = (value[m, protocol, spec] for m in MODELS)
                rows.append({"data": data_name, "protocol": protocol, "metric": spec,
                             "MF-RMSE": a, "AllRank": b, "se MF-RMSE": sa, "se AllRank": sb,
                             "winner": _winner(a - b, b - a),
                             "z": (b - a) / math.hypot(sa, sb) if math.hypot(sa, sb) > 0
                             else np.nan})
    return pd.DataFrame(rows)


def _winner(mf_rmse_ahead: float, allrank_ahead: float) -> str:
    """The model ahead by a positive margin (the margins are signed "better by"), else "tie"."""
    if mf_rmse_ahead > 0:
        return "MF-RMSE"
    return "AllRank" if allrank_ahead > 0 else "tie"


def _claim(frame: pd.DataFrame) -> pd.DataFrame:
    """Per data set, over the ranking metrics and the three offline protocols (a1, a2, b): the
    share of protocol pairs whose winner differs (same metric) vs the share of metric pairs whose
    winner differs (same protocol); the winners per protocol (counts over metrics); and, where the
    complete ratings are known, the share of metrics on which each protocol names the true winner."""
    out = []
    for data_name, part in frame[frame.metric != "RMSE"].groupby("data", sort=False):
        wide = part.pivot(index="metric", columns="protocol", values="winner")
        offline = wide[[p for p in OFFLINE if p in wide.columns]]
        by_protocol = _differing_pairs([offline.loc[m].tolist() for m in offline.index])
        by_metric = _differing_pairs([offline[p].tolist() for p in offline.columns])
        row = {"data": data_name,
               "P(winner differs | two protocols, same metric)": by_protocol,
               "P(winner differs | two metrics, same protocol)": by_metric,
               "claim holds": "yes" if by_protocol > by_metric else "no"}
        for p in wide.columns:
            counts = wide[p].value_counts()
            row[f"winner {p}"] = ", ".join(f"{w} {n}" for w, n in counts.items())
        if "complete ratings" in wide.columns:
            for p in offline.columns:
                row[f"names true winner {p}"] = float((offline[p] == wide["complete ratings"]).mean())
        out.append(row)
    return pd.DataFrame(out)


def _differing_pairs(groups) -> float:
    pairs = [(a != b) for group in groups for i, a in enumerate(group) for b in group[i + 1:]]
    return float(np.mean(pairs)) if pairs else float("nan")


def report(config: ProtocolsConfig, records: pd.DataFrame) -> Report:
    import seaborn as sns

    frame = _rows(config, records)
    claim = _claim(frame)
    ranking = frame[frame.metric != "RMSE"].copy()
    ranking["AllRank - MF-RMSE"] = ranking["AllRank"] - ranking["MF-RMSE"]
    with sns.axes_style("whitegrid"), sns.plotting_context("paper"), sns.color_palette("deep"):
        grid = sns.catplot(data=ranking, x="metric", y="AllRank - MF-RMSE", hue="protocol",
                           col="data", kind="bar", height=3.6, aspect=1.3, sharey=False)
        for ax in grid.axes.flat:
            ax.axhline(0, color="black", lw=0.8)
            ax.tick_params(axis="x", labelrotation=30)
    text = _summary_text(config, frame, claim, records[records.part == "data"])
    return Report(tables={"table_protocols": frame, "table_claim": claim},
                  figures={"fig_protocols": grid.figure}, summary=text)


def _summary_text(config, frame, claim, sizes: pd.DataFrame) -> str:
    gain = "g(r) = r" if config.graded_gain == "linear" else "g(r) = 2^r - 1"
    lines = ["MF-RMSE vs AllRank; relevant = ratings >= "
             f"{config.relevant_rating:g}; winners per protocol over P@{config.n}, R@{config.n}, "
             f"MAP, ATOP, nDCG@{config.n}, nDCG (binary gain) and Steck's graded nDCG@{config.n}, "
             f"nDCG (gain {gain}, unrated items imputed Y0 = {config.graded_imputed:g} stars in "
             "a1/a2; true ratings on the complete data).", ""]
    for data_name, part in sizes.groupby("data", sort=False):
        v = part.set_index("metric").value
        extra = (f", complete mean rating {v['complete mean rating']:.2f}"
                 if "complete mean rating" in v else "")
        lines.append(f"- {data_name}: {int(v['users'])} users x {int(v['items'])} items, "
                     f"{int(v['train ratings'])} train / {int(v['test ratings'])} test ratings, "
                     f"observed mean rating {v['observed mean rating']:.2f}{extra}")
    lines.append("")
    ranking = frame[frame.metric != "RMSE"]
    for row in claim.to_dict("records"):
        winners = "; ".join(f"{p}: {row[f'winner {p}']}" for p in PROTOCOLS
                            if isinstance(row.get(f"winner {p}"), str))
        part = ranking[ranking.data == row["data"]]
        noise = int((part.z.abs() < 2).sum())
        lines.append(f"- {row['data']} winners (metrics won) — {winners}. Winner differs between "
                     f"offline protocols {row['P(winner differs | two protocols, same metric)']:.0%}"
                     f" vs between metrics "
                     f"{row['P(winner differs | two metrics, same protocol)']:.0%} of pairs: claim "
                     f"holds: {row['claim holds']}. {noise} of {len(part)} winners are within "
                     "2 SE (|z| < 2).")
        truth = {p: row[f"names true winner {p}"] for p in OFFLINE
                 if isinstance(row.get(f"names true winner {p}"), float)
                 and row[f"names true winner {p}"] == row[f"names true winner {p}"]}
        if truth:
            lines.append("  share of metrics on which the protocol names the complete-data "
                         "winner: " + ", ".join(f"{k} {v:.0%}" for k, v in truth.items()))
    lines.append("")
    rmse = frame[frame.metric == "RMSE"]
    for row in rmse.to_dict("records"):
        lines.append(f"- {row['data']}, RMSE on {row['protocol']}: MF-RMSE {row['MF-RMSE']:.3f}, "
                     f"AllRank {row['AllRank']:.3f}")
    if REAL_DATA not in set(sizes.data):
        lines.append(skipped_note(config.ratings_file))
    return "\n".join(lines)


STUDY = Study(
    name="protocols",
    description="Steck RecSys'13 Table 1: MF-RMSE vs AllRank under MNAR ratings; the ranking "
                "protocol (all items / unrated items / rated test items) decides the winner more "
                "than the metric, and the complete ratings show which protocol tells the truth",
    presets=PRESETS, cells=cells, setup=setup, compute=compute, report=report, columns=COLUMNS,
    expected_seconds={"smoke": 10, "default": 85, "paper": 1800})
