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
ratings). A pair is observed with probability `observe_probability[r - 1]`, increasing in r
(MNAR, Marlin & Zemel 2009; Steck 2010). Observed ratings are split per user into train and test.
Relevant = 5-star ratings (Steck: "5-star ratings as relevant"). Binary metrics are simrec's
(tie-aware): P@20, R@20, MAP (= AP over the whole list), ATOP, nDCG@20 and nDCG with binary gain;
Steck's graded nDCG with imputed missing values is not in `simrec.metrics` and is not computed.
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
PROTOCOLS = ("a1 all items", "a2 unrated items", "b rated test items", "complete ratings")


@dataclass(frozen=True)
class ProtocolsConfig:
    """ratings_file: MovieLens ratings below ``shared/data`` ("" skips the real data);
    world: the simulated world; star_shares: shares of 1..5 stars in the complete ratings;
    observe_probability: P(rated | r stars) for r = 1..5 (increasing: MNAR); test_fraction:
    per-user test share of the observed ratings; relevant_rating: ratings >= this are relevant
    (5 stars); n: cutoff of P@n, R@n, nDCG@n; dim: rank of both models; mf_l2: MF-RMSE's lambda;
    allrank_l2, imputed, missing_weight: AllRank's lambda, r_m and w_m (Steck: 0.04, 2, 0.005 on
    Netflix's 17,770 items; w_m is scaled here so that w_m x items is of the same order);
    iterations: ALS sweeps."""
    ratings_file: str = "ml-latest-small/ratings.csv"
    world: WorldConfig = field(default_factory=lambda: WorldConfig(n_users=2000, n_items=1000,
                                                                   offset=0.0))
    star_shares: tuple[float, ...] = (0.35, 0.30, 0.20, 0.10, 0.05)
    observe_probability: tuple[float, ...] = (0.005, 0.01, 0.03, 0.08, 0.2)
    test_fraction: float = 0.2
    relevant_rating: float = 5.0
    n: int = 20
    dim: int = 50
    mf_l2: float = 0.07
    allrank_l2: float = 0.04
    imputed: float = 2.0
    missing_weight: float = 0.05
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

    @property
    def metric_specs(self) -> tuple[str, ...]:
        return (f"precision@{self.n}", f"recall@{self.n}", "ap", "atop", f"ndcg@{self.n}", "ndcg")


PRESETS = {
    "smoke": ProtocolsConfig(ratings_file="", world=WorldConfig(n_users=200, n_items=150),
                             observe_probability=(0.02, 0.04, 0.1, 0.2, 0.4), n=5, dim=5,
                             missing_weight=0.2, iterations=3),
    "default": ProtocolsConfig(),
    "paper": ProtocolsConfig(world=WorldConfig(n_users=10_000, n_items=3000), dim=50,
                             missing_weight=0.02, iterations=15),
}


# ---- data -----------------------------------------------------------------------------------

def _simulated_ratings(key, config: ProtocolsConfig):
    """(complete stars f32[U, I] in 1..5, observed ratings CSR [U, I])."""
    world = make_world(shared_key(key, "world"), config.world)
    logit = np.concatenate([np.asarray(quality_logit(world, users))
                            for users in user_blocks(world.n_users, 512)])
    thresholds = np.quantile(logit, np.cumsum(config.star_shares)[:-1])
    stars = 1 + (logit[..., None] > thresholds).sum(-1).astype(np.float32)
    probability = np.asarray(config.observe_probability)[stars.astype(int) - 1]
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
    if real_data_file(config.ratings_file):
        out.append({"data": "ml-latest-small"})
    return out


def _rmse(model, pairs: sp.csr_matrix, targets: np.ndarray) -> float:
    rows = np.repeat(np.arange(pairs.shape[0]), np.diff(pairs.indptr))
    prediction = np.asarray(models.scores(model, np.arange(pairs.shape[0])))[rows, pairs.indices]
    return float(np.sqrt(np.mean((prediction - targets) ** 2)))


def compute(key, config: ProtocolsConfig, cell: dict) -> dict:
    """Per model: RMSE on observed test ratings (and, simulated, on every unrated pair) and the
    ranking metrics under each protocol (user means and standard errors)."""
    own = cell_key(key, cell)
    if cell["data"] == "simulated":
        stars, observed = _simulated_ratings(key, config)
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
                             "se AllRank": np.nan, "winner": _winner(b - a, a - b)})
        for protocol in PROTOCOLS:
            if protocol not in fitted["MF-RMSE"]:
                continue
            for spec in config.metric_specs:
                (a, sa), (b, sb) = (fitted[m][protocol][spec] for m in MODELS)
                rows.append({"data": r.cell["data"], "protocol": protocol, "metric": spec,
                             "MF-RMSE": a, "AllRank": b, "se MF-RMSE": sa, "se AllRank": sb,
                             "winner": _winner(a - b, b - a)})
    return pd.DataFrame(rows)


def _winner(mf_rmse_ahead: float, allrank_ahead: float) -> str:
    """The model ahead by a positive margin (the margins are signed "better by"), else "tie"."""
    if mf_rmse_ahead > 0:
        return "MF-RMSE"
    return "AllRank" if allrank_ahead > 0 else "tie"


def _claim(frame: pd.DataFrame) -> pd.DataFrame:
    """Per data set: the share of protocol pairs whose winner differs (same metric) vs the share
    of metric pairs whose winner differs (same protocol), over the ranking metrics."""
    out = []
    for data_name, part in frame[frame.metric != "RMSE"].groupby("data", sort=False):
        wide = part.pivot(index="metric", columns="protocol", values="winner")
        by_protocol = _differing_pairs([wide.loc[m].tolist() for m in wide.index])
        by_metric = _differing_pairs([wide[p].tolist() for p in wide.columns])
        out.append({"data": data_name,
                    "P(winner differs | two protocols, same metric)": by_protocol,
                    "P(winner differs | two metrics, same protocol)": by_metric,
                    "claim holds": "yes" if by_protocol > by_metric else "no",
                    **{f"winner {p}": "/".join(sorted(set(wide[p]))) for p in wide.columns}})
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
    lines = ["MF-RMSE vs AllRank; relevant = ratings >= "
             f"{config.relevant_rating:g}; winners per protocol over P@{config.n}, R@{config.n}, "
             f"MAP, ATOP, nDCG@{config.n}, nDCG (binary gain).", ""]
    for r in results:
        v = r.value
        extra = (f", complete mean rating {v['complete_mean_rating']:.2f}"
                 if "complete_mean_rating" in v else "")
        lines.append(f"- {r.cell['data']}: {v['users']} users x {v['items']} items, "
                     f"{v['train_ratings']} train / {v['test_ratings']} test ratings, observed mean "
                     f"rating {v['observed_mean_rating']:.2f}{extra}")
    for row in claim.to_dict("records"):
        winners = "; ".join(f"{k[len('winner '):]}: {w}" for k, w in row.items()
                            if k.startswith("winner "))
        lines.append(f"- {row['data']} winners — {winners}. Winner differs between protocols "
                     f"{row['P(winner differs | two protocols, same metric)']:.0%} vs between "
                     f"metrics {row['P(winner differs | two metrics, same protocol)']:.0%} of "
                     f"pairs: claim holds: {row['claim holds']}.")
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
