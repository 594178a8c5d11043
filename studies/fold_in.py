"""Study ``fold_in``: NDCG@50 of new users as they reveal more interactions (FastML, "Evaluating
recommender systems").

Strong generalisation: a share of the users is held out of training. For each held-out user the
items are put in a uniformly random order and the first L = 1 .. max_known are revealed (nested:
the L-th reveal adds one item); the model gets the L revealed items, ranks every item not
revealed, and NDCG@K (K = 50) is computed on the user's remaining items. Models need no
retraining:

* popularity: training counts (the same list for everyone);
* iALS (Hu et al. ICDM'08; `simrec.models.ials`): the user vector is the ridge-regularised least
  squares solve with the item factors fixed (`simrec.models.fold_in`, one ALS half-step):
  x = (w0 YᵀY + (1 - w0) Y_Lᵀ Y_L + λI)⁻¹ Y_Lᵀ 1, Y_L the factors of the L revealed items;
* MF-ADG (Lim et al. RecSys'15, OPT-ADG; `simrec.models.train`): the same ridge solve with the
  item factors θᵢ of the OPT-ADG-trained MF fixed, scored by x·θᵢ (the trained item bias bᵢ is
  left out: it is on the scale of the trained user vectors, and a probe on the weak split scored
  NDCG@50 0.12 without it vs 0.09 with it on the simulated data, 0.25 vs 0.20 on ml-latest-small);
* EASE^R (Steck WWW'19) and item-kNN (cosine): the scores are a product of the revealed history
  with the item-item weights, so a new history is simply scored.

Only held-out users with at least max_known + min_rest interactions are evaluated, so every point
of a curve averages the same users. The curves are mean NDCG@K against L with normal confidence
bands over users; crossing points are the L where the order of two models' means changes;
MANDCG (FastML) is the mean over users of the per-user average over L = 1 .. max_known, with its
standard error over users. Weak generalisation for comparison: the training users' interactions
are split per user (weak_test_fraction held out); every model is fitted once on the training
part and that one fit serves both protocols — new users folded in (strong) and the training users
scored on their held-out part with training items excluded (weak; for the fold-in models the
training user's vector is the same ridge solve on their training items, which for iALS is its
trained vector). All L are evaluated in one metrics pass per model: the L = 1 .. max_known
histories of every evaluated user are stacked as rows of one sparse matrix, and fold-in solves
run batched over those rows.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

import jax
import matplotlib
import numpy as np
import optax
import pandas as pd
import scipy.sparse as sp

from simrec import data, metrics, missing, models, stats
from simrec.runner import Report, Study, cell_key, shared_key
from simrec.world import WorldConfig, make_world
from studies._data import real_data_file, skipped_note

matplotlib.use("Agg")

MODELS = ("popularity", "iALS", "MF-ADG", "EASE", "item-kNN")


@dataclass(frozen=True)
class FoldInConfig:
    """ratings_file: MovieLens ratings below ``shared/data`` ("" skips the real data); min_rating,
    min_item: positives = ratings >= min_rating, then items with >= min_item users; world,
    observation_rate: the simulated world and the SRS rate of its observed sets; held_out_fraction:
    share of users held out (strong generalisation); max_known: largest L; min_rest: held-out users
    need max_known + min_rest interactions; k: NDCG cutoff; weak_test_fraction: per-user test share
    of the weak-generalisation split; ials_dim, ials_l2, ials_unobserved_weight, ials_iterations:
    iALS (AllRank-style) settings, ials_l2 and ials_unobserved_weight also of both fold-ins;
    adg_pairs, adg_learning_rate, adg_l2: MF-ADG (k = ials_dim, γ = 100) trained on about
    adg_pairs sampled (u, i⁺) pairs, batch 256, adagrad with this rate, L2 λ; ease_l2: EASE
    lambda; knn_k: item-kNN neighbours; level: the confidence level of the bands."""
    ratings_file: str = "ml-latest-small/ratings.csv"
    min_rating: float = 4.0
    min_item: int = 5
    world: WorldConfig = field(default_factory=lambda: WorldConfig(n_users=2000, n_items=1500,
                                                                   offset=-4.0))
    observation_rate: float = 0.5
    held_out_fraction: float = 0.2
    max_known: int = 50
    min_rest: int = 5
    k: int = 50
    weak_test_fraction: float = 0.2
    ials_dim: int = 32
    ials_l2: float = 10.0
    ials_unobserved_weight: float = 0.05
    ials_iterations: int = 8
    adg_pairs: int = 400_000
    adg_learning_rate: float = 0.1
    adg_l2: float = 0.01
    ease_l2: float = 300.0
    knn_k: int = 100
    level: float = 0.95

    def __post_init__(self):
        for name in ("max_known", "min_rest", "k", "ials_dim", "ials_iterations", "knn_k",
                     "adg_pairs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("observation_rate", "held_out_fraction", "weak_test_fraction", "level"):
            if not 0 < getattr(self, name) < 1 and not (name == "observation_rate"
                                                         and self.observation_rate == 1):
                raise ValueError(f"{name} must be in (0, 1), got {getattr(self, name)}")
        for name in ("ials_l2", "ease_l2", "adg_learning_rate"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise ValueError(f"{name} must be finite and > 0, got {getattr(self, name)}")
        for name in ("ials_unobserved_weight", "adg_l2"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) >= 0):
                raise ValueError(f"{name} must be finite and >= 0, got {getattr(self, name)}")


PRESETS = {
    "smoke": FoldInConfig(ratings_file="", world=WorldConfig(n_users=200, n_items=150, offset=-2.5),
                          max_known=5, min_rest=3, k=10, ials_dim=8, ials_iterations=3,
                          adg_pairs=20_000, ease_l2=50.0, knn_k=20),
    "default": FoldInConfig(),
    "paper": FoldInConfig(world=WorldConfig(n_users=6000, n_items=3000, offset=-4.6), ials_dim=64,
                          ials_iterations=15),
}


# ---- data -----------------------------------------------------------------------------------

def _positives(key, config: FoldInConfig, source: str) -> sp.csr_matrix:
    """Observed positives O+ [U, I] of the real data or of the simulated world."""
    if source == "ml-latest-small":
        raw = data.load_interactions(real_data_file(config.ratings_file))
        return data.filter_min_counts(data.filter_ratings(raw, config.min_rating),
                                      min_item=config.min_item).ratings.astype(bool)
    world = make_world(shared_key(key, "world"), config.world)
    prior = missing.prior_relevant(shared_key(key, "prior"), world)
    return missing.observe_srs(shared_key(key, "observe"), prior, config.observation_rate)


def _reveal_positions(key, held_out: sp.csr_matrix) -> np.ndarray:
    """i64[nnz]: each entry's 0-based position in its row under a uniformly random order; an
    entry is revealed at L known items iff its position < L (so reveals are nested in L)."""
    rows = np.repeat(np.arange(held_out.shape[0]), np.diff(held_out.indptr))
    order = np.lexsort((np.asarray(jax.random.uniform(key, (held_out.nnz,))), rows))
    positions = np.empty(held_out.nnz, np.int64)
    positions[order] = np.arange(held_out.nnz) - held_out.indptr[rows[order]]
    return positions


def _stacked_reveals(held_out: sp.csr_matrix, positions: np.ndarray, max_known: int):
    """(known, rest): bool CSR [R * max_known, I], row r * max_known + L - 1 holding user r's
    first L revealed items (known) and the others (rest), for L = 1 .. max_known, so one
    metrics pass covers every L."""
    n_rows = held_out.shape[0]
    reveals = np.arange(1, max_known + 1)
    entry_rows = np.repeat(np.arange(n_rows), np.diff(held_out.indptr))
    stacked_rows = entry_rows[:, None] * max_known + reveals - 1         # [nnz, max_known]
    is_known = positions[:, None] < reveals                               # [nnz, max_known]
    items = np.broadcast_to(held_out.indices[:, None], is_known.shape)
    shape = (n_rows * max_known, held_out.shape[1])

    def csr(keep):
        return sp.csr_matrix((np.ones(int(keep.sum()), bool), (stacked_rows[keep], items[keep])),
                             shape=shape)
    return csr(is_known), csr(~is_known)


# ---- models ---------------------------------------------------------------------------------

def _fold_in_scorer(item_factors, config: FoldInConfig):
    """score(history bool CSR [R, I]) -> f32[R, I]: x·yᵢ with x the ridge fold-in of the history
    (module docstring) and the item factors y (f32[I, k]) fixed."""
    factors = np.asarray(item_factors)

    def score(history):
        users = models.fold_in(factors, history, config.ials_l2,
                               unobserved_weight=config.ials_unobserved_weight)
        return np.asarray(users) @ factors.T
    return score


def _fit(key, config: FoldInConfig, train: sp.csr_matrix) -> dict:
    """{name: score(history bool CSR [R, I]) -> f32[R, I]} of the models trained on `train`."""
    pop = np.asarray(models.popularity(train).item_bias)
    als = models.ials(jax.random.fold_in(key, 0), train, dim=config.ials_dim, l2=config.ials_l2,
                      unobserved_weight=config.ials_unobserved_weight,
                      iterations=config.ials_iterations)
    adg = models.train(jax.random.fold_in(key, 1), models.OptADG(dim=config.ials_dim), train,
                       epochs=-(-config.adg_pairs // train.nnz), batch_size=256,
                       optimizer=optax.adagrad(config.adg_learning_rate), l2=config.adg_l2)
    ease = models.ease(train, config.ease_l2)
    knn = models.item_knn(train, config.knn_k)

    def ease_scores(history):
        return np.asarray(models.ease_scores(dataclasses.replace(ease, train=history),
                                             np.arange(history.shape[0])))

    def knn_scores(history):
        return models.item_knn_scores(dataclasses.replace(knn, train=history),
                                      np.arange(history.shape[0]))

    return {"popularity": lambda history: np.broadcast_to(pop, history.shape),
            "iALS": _fold_in_scorer(als.item, config), "MF-ADG": _fold_in_scorer(adg.item, config),
            "EASE": ease_scores, "item-kNN": knn_scores}


# ---- cells ----------------------------------------------------------------------------------

def cells(config: FoldInConfig) -> list[dict]:
    out = [{"data": "simulated"}]
    if real_data_file(config.ratings_file):
        out.append({"data": "ml-latest-small"})
    return out


def _summary(values: np.ndarray, level: float) -> dict:
    """Mean, CI bounds and SE of per-user values (NaN-free f64[n])."""
    mean, low, high, se = stats.mean_ci(values, level)
    return {"mean": mean, "low": low, "high": high, "se": se}


def _block_scorer(score, histories: sp.csr_matrix):
    """A `metrics.evaluate` score function: a contiguous block of rows -> f32[B, I]."""
    return lambda rows: score(histories[rows[0]:rows[-1] + 1])


def compute(key, config: FoldInConfig, cell: dict) -> dict:
    """Strong generalisation: NDCG@k per L and model (mean, CI) and MANDCG; weak generalisation:
    NDCG@k of the same fitted models on the held-out part of the training users."""
    started = time.perf_counter()
    own = cell_key(key, cell)
    observed = _positives(own, config, cell["data"])
    users = missing.split_users(jax.random.fold_in(own, 0), observed, config.held_out_fraction)
    counts = np.diff(users.held_out.indptr)
    evaluated = users.held_out[counts >= config.max_known + config.min_rest]
    if evaluated.shape[0] < 2:
        raise ValueError(f"fewer than 2 held-out users have >= max_known + min_rest = "
                         f"{config.max_known + config.min_rest} interactions; lower max_known")
    positions = _reveal_positions(jax.random.fold_in(own, 1), evaluated)
    weak_split = missing.split_per_user(jax.random.fold_in(own, 3), users.train,
                                        (1 - config.weak_test_fraction, 0.0,
                                         config.weak_test_fraction), n_folds=1)[0]
    scorers = _fit(jax.random.fold_in(own, 2), config, weak_split.train)
    spec = f"ndcg@{config.k}"
    known, rest = _stacked_reveals(evaluated, positions, config.max_known)
    strong, mandcg, weak = {}, {}, {}
    for name, score in scorers.items():
        values = metrics.evaluate(_block_scorer(score, known), rest, exclude=known,
                                  metrics=(spec,))[spec].reshape(-1, config.max_known)
        strong[name] = [_summary(values[:, j], config.level) for j in range(config.max_known)]
        mandcg[name] = _summary(values.mean(axis=1), config.level)
        values = metrics.evaluate(_block_scorer(score, weak_split.train), weak_split.test,
                                  exclude=weak_split.train, metrics=(spec,))[spec]
        weak[name] = _summary(values[np.isfinite(values)], config.level)
    return {"strong": strong, "mandcg": mandcg, "weak": weak,
            "users": int(observed.shape[0]), "items": int(observed.shape[1]),
            "interactions": int(observed.nnz), "train_users": int(users.train.shape[0]),
            "held_out_users": int(users.held_out.shape[0]),
            "evaluated_users": int(evaluated.shape[0]),
            "wall_time_s": time.perf_counter() - started}


# ---- report ---------------------------------------------------------------------------------

def _crossings(curves: pd.DataFrame) -> list[dict]:
    """Per pair of models, the L at which the sign of the difference of mean NDCG changes
    (reported as the first L after the change) and which model leads before and after. A
    crossing is "clear" when the model leading before it is significantly ahead (its confidence
    interval entirely above the other's) at some smaller L and the model leading after it at
    some L at or beyond it; otherwise the order change is within noise."""
    out = []
    for data_name, part in curves.groupby("data", sort=False):
        wide = {v: part.pivot(index="L", columns="model", values=v) for v in ("mean", "low", "high")}
        for i, a in enumerate(MODELS):
            for b in MODELS[i + 1:]:
                diff = (wide["mean"][a] - wide["mean"][b]).to_numpy()
                ahead = {a: (wide["low"][a] > wide["high"][b]).to_numpy(),
                         b: (wide["low"][b] > wide["high"][a]).to_numpy()}
                for j in np.flatnonzero(np.sign(diff[1:]) * np.sign(diff[:-1]) < 0):
                    before, after = (a, b) if diff[j] > 0 else (b, a)
                    out.append({"data": data_name, "model a": a, "model b": b,
                                "L": int(wide["mean"].index[j + 1]),
                                "leader before": before, "leader after": after,
                                "clear": bool(ahead[before][:j + 1].any()
                                              and ahead[after][j + 1:].any())})
    return out


def report(config: FoldInConfig, results) -> Report:
    import matplotlib.pyplot as plt
    import seaborn as sns

    curve_rows, table_rows = [], []
    for r in results:
        name = r.cell["data"]
        for model in MODELS:
            for j, point in enumerate(r.value["strong"][model]):
                curve_rows.append({"data": name, "model": model, "L": j + 1, **point})
            mandcg, weak = r.value["mandcg"][model], r.value["weak"][model]
            table_rows.append({"data": name, "model": model,
                               "MANDCG (strong)": mandcg["mean"], "MANDCG se": mandcg["se"],
                               f"NDCG@{config.k} strong L=1": r.value["strong"][model][0]["mean"],
                               f"NDCG@{config.k} strong L={config.max_known}":
                                   r.value["strong"][model][-1]["mean"],
                               f"NDCG@{config.k} weak": weak["mean"], "weak se": weak["se"],
                               "evaluated users": r.value["evaluated_users"],
                               "cell wall time (s)": r.value["wall_time_s"]})
    curves = pd.DataFrame(curve_rows)
    table = pd.DataFrame(table_rows)
    crossings = pd.DataFrame(_crossings(curves),
                             columns=["data", "model a", "model b", "L", "leader before",
                                      "leader after", "clear"])

    sns.set_theme(style="whitegrid", context="paper")
    fig, axes = plt.subplots(1, len(results), figsize=(5.2 * len(results), 3.9), squeeze=False)
    palette = dict(zip(MODELS, sns.color_palette("tab10", len(MODELS))))
    for ax, r in zip(axes[0], results):
        part = curves[curves.data == r.cell["data"]]
        for model in MODELS:
            line = part[part.model == model]
            ax.plot(line.L, line["mean"], color=palette[model], label=model)
            ax.fill_between(line.L, line.low, line.high, color=palette[model], alpha=0.2)
        ax.set_xlabel("L (revealed interactions of a new user)")
        ax.set_ylabel(f"mean NDCG@{config.k} on the rest")
        ax.set_title(f"{r.cell['data']} ({r.value['evaluated_users']} held-out users, "
                     f"{config.level:.0%} CI)", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return Report(tables={"table_mandcg": table, "table_crossings": crossings,
                          "table_curves": curves},
                  figures={"fig_ndcg_vs_L": fig}, summary=_summary_text(config, table, crossings))


def _summary_text(config, table, crossings) -> str:
    lines = [f"Strong generalisation: NDCG@{config.k} of held-out users after revealing "
             f"L = 1..{config.max_known} interactions (fold-in, no retraining); MANDCG = mean over "
             f"L (± standard error over users). Weak generalisation: the same fitted models on a "
             f"per-user {config.weak_test_fraction:.0%} test split of the training users. "
             f"Crossings marked * are within noise: the leader before it is never "
             f"significantly ahead ({config.level:.0%} CIs apart) at a smaller L, or the leader "
             "after it never at a larger one.",
             ""]
    for data_name, part in table.groupby("data", sort=False):
        ranked = part.sort_values("MANDCG (strong)", ascending=False)
        lines.append(f"- {data_name} ({int(part['evaluated users'].iloc[0])} evaluated new users; "
                     f"fitted and evaluated in {part['cell wall time (s)'].iloc[0]:.0f} s): "
                     "MANDCG " + ", ".join(
                         f"{row.model} {row['MANDCG (strong)']:.3f} ± {row['MANDCG se']:.3f}"
                         for _, row in ranked.iterrows())
                     + f"; weak NDCG@{config.k} " + ", ".join(
                         f"{row.model} {row[f'NDCG@{config.k} weak']:.3f}"
                         for _, row in ranked.iterrows()))
        cross = crossings[crossings.data == data_name]
        if len(cross):
            lines.append("  crossings: " + "; ".join(
                f"{c['leader before']} -> {c['leader after']} at L = {c['L']}"
                + ("" if c["clear"] else "*") for c in cross.to_dict("records")))
        else:
            lines.append("  no crossings of mean curves")
    if not real_data_file(config.ratings_file):
        lines.append(skipped_note(config.ratings_file))
    return "\n".join(lines)


STUDY = Study(
    name="fold_in",
    description="FastML: NDCG@50 of new users vs the number L of revealed interactions "
                "(fold-in, strong generalisation), crossing points and MANDCG, next to weak "
                "generalisation, for popularity, iALS and MF-ADG fold-in, EASE and item-kNN",
    presets=PRESETS, cells=cells, compute=compute, report=report, source=__file__,
    report_helpers=(_crossings, _summary_text))
