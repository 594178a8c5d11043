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

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pandas as pd
import scipy.sparse as sp

from simrec import data, metrics, missing, models
from simrec.models.explicit import allrank, mf_rmse
from simrec.runner import Report, Study, cell_key, shared_key
from simrec.world import WorldConfig, make_world, quality_logit, user_blocks
from studies._data import real_data_file, skipped_note

matplotlib.use("Agg")

MODELS = ("MF-RMSE", "AllRank")
EXPOSURE_CELL = "simulated, item exposure"
#: gain functions of the graded nDCG, rating -> gain
GAINS = {"linear": lambda r: r, "exponential": lambda r: 2.0 ** r - 1.0}
PROTOCOLS = ("a1 all items", "a2 unrated items", "b rated test items", "complete ratings")
OFFLINE = PROTOCOLS[:3]


@dataclass(frozen=True)
class ProtocolsConfig:
    """ratings_file: MovieLens ratings below ``shared/data`` ("" skips the real data);
    world: the simulated world; star_shares: shares of 1..5 stars in the complete ratings;
    observe_probability: P(rated | r stars) for r = 1..5 (increasing: MNAR); test_fraction:
    per-user test share of the observed ratings; relevant_rating: ratings >= this are relevant
    (5 stars); n: cutoff of P@n, R@n, nDCG@n; dim: rank of both models; mf_l2: MF-RMSE's lambda;
    allrank_l2, imputed, missing_weight: AllRank's lambda, r_m and w_m — Steck's Netflix values
    0.04, 2 and 0.005 (λ needs no rescaling: the ridge is λ times each row's total weight). A
    probe over w_m in 0.002..0.1 found no degeneracy at these data sizes: in the simulated cell
    (16-dimensional world) 0.005 gave AllRank its best AP, ATOP and nDCG under every protocol and
    its best observed-test RMSE; on ml-latest-small larger w_m raised (a1)/(a2) (AP under (a2)
    0.12 at 0.005, 0.19 at 0.05) without changing a winner; exposure_sigma: s of the
    item-exposure cell (0 drops that cell);
    graded_gain, graded_imputed: gain function of the graded nDCG ("linear": g = r,
    "exponential": g = 2^r - 1) and the rating Y0 imputed for unrated items (module docstring);
    iterations: ALS sweeps."""
    ratings_file: str = "ml-latest-small/ratings.csv"
    world: WorldConfig = field(default_factory=lambda: WorldConfig(n_users=2000, n_items=1000,
                                                                   dim=4, offset=0.0))
    star_shares: tuple[float, ...] = (0.35, 0.30, 0.20, 0.10, 0.05)
    observe_probability: tuple[float, ...] = (0.005, 0.01, 0.03, 0.08, 0.2)
    test_fraction: float = 0.2
    relevant_rating: float = 5.0
    n: int = 20
    dim: int = 50
    mf_l2: float = 0.07
    allrank_l2: float = 0.04
    imputed: float = 2.0
    missing_weight: float = 0.005
    exposure_sigma: float = 1.0
    graded_gain: str = "linear"
    graded_imputed: float = 2.0
    iterations: int = 10

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
        for name in ("n", "dim", "iterations"):
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
                             missing_weight=0.2, iterations=3),
    "default": ProtocolsConfig(),
    "paper": ProtocolsConfig(world=WorldConfig(n_users=10_000, n_items=3000, dim=4), dim=50,
                             iterations=15),
}


# ---- data -----------------------------------------------------------------------------------

def _item_exposure(key, n_items: int, sigma: float) -> np.ndarray:
    """e_i = exp(sigma z_i - sigma²/2), z_i ~ N(0, 1): log-normal with mean 1.  f64[I]."""
    z = np.asarray(jax.random.normal(shared_key(key, "exposure"), (n_items,)), np.float64)
    return np.exp(sigma * z - sigma ** 2 / 2)


def _simulated_ratings(key, config: ProtocolsConfig, exposure_sigma: float = 0.0):
    """(complete stars f32[U, I] in 1..5, observed ratings CSR [U, I]); P(observed) =
    min(observe_probability[r - 1] e_i, 1) with e = `_item_exposure` (module docstring)."""
    world = make_world(shared_key(key, "world"), config.world)
    logit = np.concatenate([np.asarray(quality_logit(world, users))
                            for users in user_blocks(world.n_users, 512)])
    thresholds = np.quantile(logit, np.cumsum(config.star_shares)[:-1])
    stars = 1 + (logit[..., None] > thresholds).sum(-1).astype(np.float32)
    probability = np.asarray(config.observe_probability)[stars.astype(int) - 1]
    if exposure_sigma > 0:
        probability = np.minimum(probability * _item_exposure(key, world.n_items, exposure_sigma), 1)
    uniforms = np.asarray(jax.random.uniform(shared_key(key, "observe"), stars.shape))
    observed = sp.csr_matrix(np.where(uniforms < probability, stars, 0.0))
    return stars, observed


def _movielens(config: ProtocolsConfig) -> sp.csr_matrix:
    raw = data.load_interactions(real_data_file(config.ratings_file))
    return data.filter_min_counts(raw, min_user=1, min_item=1).ratings


def _split(key, ratings: sp.csr_matrix, test_fraction: float):
    """Per-user random split of the observed ratings: (train CSR, test CSR), ratings kept."""
    split = missing.split_per_user(key, ratings.astype(bool), (1 - test_fraction, 0.0,
                                                              test_fraction), n_folds=1)[0]
    return ratings.multiply(split.train).tocsr(), ratings.multiply(split.test).tocsr()


# ---- cells ----------------------------------------------------------------------------------

def cells(config: ProtocolsConfig) -> list[dict]:
    out = [{"data": "simulated"}]
    if config.exposure_sigma > 0:
        out.append({"data": EXPOSURE_CELL})
    if real_data_file(config.ratings_file):
        out.append({"data": "ml-latest-small"})
    return out


def _graded_settings(config: ProtocolsConfig, train_mask, test: sp.csr_matrix, stars):
    """{protocol: (relevant, exclude, gains f64[U, I])} of the graded nDCG (module docstring)."""
    gain = GAINS[config.graded_gain]
    imputed = np.full(test.shape, gain(config.graded_imputed))
    rows = np.repeat(np.arange(test.shape[0]), np.diff(test.indptr))
    imputed[rows, test.indices] = gain(test.data)
    everything = np.ones(test.shape, bool)
    out = {"a1 all items": (everything, None, imputed),
           "a2 unrated items": (everything, train_mask, imputed),
           "b rated test items": (test.astype(bool), ~test.astype(bool).toarray(), imputed)}
    if stars is not None:
        out["complete ratings"] = (everything, train_mask, gain(stars.astype(np.float64)))
    return out


def _rmse(model, pairs: sp.csr_matrix, targets: np.ndarray) -> float:
    rows = np.repeat(np.arange(pairs.shape[0]), np.diff(pairs.indptr))
    prediction = np.asarray(models.scores(model, np.arange(pairs.shape[0])))[rows, pairs.indices]
    return float(np.sqrt(np.mean((prediction - targets) ** 2)))


def compute(key, config: ProtocolsConfig, cell: dict) -> dict:
    """Per model: RMSE on observed test ratings (and, simulated, on every unrated pair) and the
    ranking metrics under each protocol (user means and standard errors)."""
    own = cell_key(key, cell)
    if cell["data"] in ("simulated", EXPOSURE_CELL):
        sigma = config.exposure_sigma if cell["data"] == EXPOSURE_CELL else 0.0
        stars, observed = _simulated_ratings(key, config, sigma)
    else:
        stars, observed = None, _movielens(config)
    train, test = _split(jax.random.fold_in(own, 0), observed, config.test_fraction)
    train_mask = train.astype(bool)
    test_mask = test.astype(bool)
    relevant_test = sp.csr_matrix(test.multiply(test >= config.relevant_rating)).astype(bool)
    not_test = ~test_mask.toarray()
    settings = {"a1 all items": (relevant_test, None),
                "a2 unrated items": (relevant_test, train_mask),
                "b rated test items": (relevant_test, not_test)}
    out = {"users": int(observed.shape[0]), "items": int(observed.shape[1]),
           "train_ratings": int(train.nnz), "test_ratings": int(test.nnz),
           "observed_mean_rating": float(observed.data.mean()),
           "relevant_test": int(relevant_test.nnz)}
    if stars is not None:
        settings["complete ratings"] = (sp.csr_matrix(stars >= config.relevant_rating), train_mask)
        out["complete_mean_rating"] = float(stars.mean())
    graded = _graded_settings(config, train_mask, test, stars)
    fitted = {
        "MF-RMSE": mf_rmse(jax.random.fold_in(own, 1), train, dim=config.dim, l2=config.mf_l2,
                           iterations=config.iterations),
        "AllRank": allrank(jax.random.fold_in(own, 1), train, dim=config.dim,
                           l2=config.allrank_l2, imputed=config.imputed,
                           missing_weight=config.missing_weight, iterations=config.iterations)}
    results = {}
    for name, model in fitted.items():
        score = functools.partial(models.scores, model)
        row = {"rmse observed test": _rmse(model, test, test.data)}
        if stars is not None:
            unrated = sp.csr_matrix(~train_mask.toarray())
            rows = np.repeat(np.arange(unrated.shape[0]), np.diff(unrated.indptr))
            row["rmse all unrated"] = _rmse(model, unrated, stars[rows, unrated.indices])
        for protocol, (relevant, exclude) in settings.items():
            values = metrics.evaluate(score, relevant, exclude=exclude, metrics=config.metric_specs)
            row[protocol] = {spec: metrics.mean_and_se(v) for spec, v in values.items()}
            relevant, exclude, gains = graded[protocol]
            for spec, k in config.graded_specs.items():
                row[protocol][spec] = metrics.mean_and_se(
                    metrics.ndcg(score, relevant, k=k, exclude=exclude, gains=gains))
        results[name] = row
    out["models"] = results
    return out


# ---- report ---------------------------------------------------------------------------------

def _rows(config, results) -> pd.DataFrame:
    rows = []
    for r in results:
        fitted = r.value["models"]
        for metric in ("rmse observed test", "rmse all unrated"):
            if metric in fitted["MF-RMSE"]:
                a, b = (fitted[m][metric] for m in MODELS)
                rows.append({"data": r.cell["data"], "protocol": "observed test" if "observed"
                             in metric else "complete ratings", "metric": "RMSE",
                             "MF-RMSE": a, "AllRank": b, "se MF-RMSE": np.nan,
                             "se AllRank": np.nan, "winner": _winner(b - a, a - b), "z": np.nan})
        for protocol in PROTOCOLS:
            if protocol not in fitted["MF-RMSE"]:
                continue
            for spec in config.all_specs:
                (a, sa), (b, sb) = (fitted[m][protocol][spec] for m in MODELS)
                rows.append({"data": r.cell["data"], "protocol": protocol, "metric": spec,
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


def report(config: ProtocolsConfig, results) -> Report:
    import matplotlib.pyplot as plt
    import seaborn as sns

    frame = _rows(config, results)
    claim = _claim(frame)
    sns.set_theme(style="whitegrid", context="paper")
    ranking = frame[frame.metric != "RMSE"].copy()
    ranking["AllRank - MF-RMSE"] = ranking["AllRank"] - ranking["MF-RMSE"]
    grid = sns.catplot(data=ranking, x="metric", y="AllRank - MF-RMSE", hue="protocol",
                       col="data", kind="bar", height=3.6, aspect=1.3, sharey=False)
    for ax in grid.axes.flat:
        ax.axhline(0, color="black", lw=0.8)
        ax.tick_params(axis="x", labelrotation=30)
    text = _summary_text(config, frame, claim, results)
    return Report(tables={"table_protocols": frame, "table_claim": claim},
                  figures={"fig_protocols": grid.figure}, summary=text)


def _summary_text(config, frame, claim, results) -> str:
    gain = "g(r) = r" if config.graded_gain == "linear" else "g(r) = 2^r - 1"
    lines = ["MF-RMSE vs AllRank; relevant = ratings >= "
             f"{config.relevant_rating:g}; winners per protocol over P@{config.n}, R@{config.n}, "
             f"MAP, ATOP, nDCG@{config.n}, nDCG (binary gain) and Steck's graded nDCG@{config.n}, "
             f"nDCG (gain {gain}, unrated items imputed Y0 = {config.graded_imputed:g} stars in "
             "a1/a2; true ratings on the complete data).", ""]
    for r in results:
        v = r.value
        extra = (f", complete mean rating {v['complete_mean_rating']:.2f}"
                 if "complete_mean_rating" in v else "")
        lines.append(f"- {r.cell['data']}: {v['users']} users x {v['items']} items, "
                     f"{v['train_ratings']} train / {v['test_ratings']} test ratings, observed mean "
                     f"rating {v['observed_mean_rating']:.2f}{extra}")
    lines.append("")
    ranking = frame[frame.metric != "RMSE"]
    for row in claim.to_dict("records"):
        winners = "; ".join(f"{k[len('winner '):]}: {w}" for k, w in row.items()
                            if k.startswith("winner ") and isinstance(w, str))
        part = ranking[ranking.data == row["data"]]
        noise = int((part.z.abs() < 2).sum())
        lines.append(f"- {row['data']} winners (metrics won) — {winners}. Winner differs between "
                     f"offline protocols {row['P(winner differs | two protocols, same metric)']:.0%}"
                     f" vs between metrics "
                     f"{row['P(winner differs | two metrics, same protocol)']:.0%} of pairs: claim "
                     f"holds: {row['claim holds']}. {noise} of {len(part)} winners are within "
                     "2 SE (|z| < 2).")
        truth = {k[len("names true winner "):]: v for k, v in row.items()
                 if k.startswith("names true winner ") and isinstance(v, float) and v == v}
        if truth:
            lines.append("  share of metrics on which the protocol names the complete-data "
                         "winner: " + ", ".join(f"{k} {v:.0%}" for k, v in truth.items()))
    lines.append("")
    rmse = frame[frame.metric == "RMSE"]
    for row in rmse.to_dict("records"):
        lines.append(f"- {row['data']}, RMSE on {row['protocol']}: MF-RMSE {row['MF-RMSE']:.3f}, "
                     f"AllRank {row['AllRank']:.3f}")
    if not real_data_file(config.ratings_file):
        lines.append(skipped_note(config.ratings_file))
    return "\n".join(lines)


STUDY = Study(
    name="protocols",
    description="Steck RecSys'13 Table 1: MF-RMSE vs AllRank under MNAR ratings; the ranking "
                "protocol (all items / unrated items / rated test items) decides the winner more "
                "than the metric, and the complete ratings show which protocol tells the truth",
    presets=PRESETS, cells=cells, compute=compute, report=report, source=__file__,
    report_helpers=(_rows, _winner, _claim, _differing_pairs, _summary_text))
