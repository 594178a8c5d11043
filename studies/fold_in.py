"""Study ``fold_in``: NDCG@50 of new users as they reveal more interactions (FastML, "Evaluating
recommender systems").

Strong generalisation: a share of the users is held out of training. For each held-out user the
items are put in a uniformly random order and the first L = 1 .. max_known are revealed (nested:
the L-th reveal adds one item); the model gets the L revealed items, ranks every item not
revealed, and NDCG@K (K = 50) is computed on the user's remaining items. Models need no
retraining; each is a `simrec.models` spec (`model_spec`), fitted once by `simrec.models.fit` and
scored from a history by `simrec.models.score(model, None, history)`:

* popularity: training counts (the same list for everyone);
* iALS (Hu et al. ICDM'08; `simrec.models.ials`): the user vector is the ridge-regularised least
  squares solve with the item factors fixed (the model function `simrec.models.fold_in`, one ALS
  half-step; not to be confused with `jax.random.fold_in` or this study):
  x = (w0 YᵀY + (1 - w0) Y_Lᵀ Y_L + λI)⁻¹ Y_Lᵀ 1, Y_L the factors of the L revealed items;
* MF-ADG (Lim et al. RecSys'15, OPT-ADG; `simrec.models.MFSpec` with a `FoldIn`): the same ridge
  solve with the item factors θᵢ of the OPT-ADG-trained MF fixed, scored by x·θᵢ (the trained item
  bias bᵢ is left out: it is on the scale of the trained user vectors, and a probe on the weak
  split scored NDCG@50 0.12 without it vs 0.09 with it on the simulated data, 0.25 vs 0.20 on
  ml-latest-small);
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

`setup` prepares every data source (positives, the user split, the stacked reveals, the weak
split); a cell is (data source, model): it fits the model once and evaluates both protocols.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import jax
import numpy as np
import pandas as pd
import scipy.sparse as sp

from simrec import data, metrics, missing, models, stats
from simrec.runner import Report, Study, cell_key, shared_key
from simrec.world import WorldConfig, make_world
from simrec_studies._data import real_data_file, skipped_note

MODELS = ("popularity", "iALS", "MF-ADG", "EASE", "item-kNN")
SIMULATED, REAL = "simulated", "ml-latest-small"
#: the record schema: one row per (data, model) and curve point L (protocol "strong", measure
#: "ndcg"), MANDCG (protocol "strong", measure "mandcg", L = 0) and weak generalisation
#: (protocol "weak", measure "ndcg", L = 0); statistics over the users averaged
COLUMNS = {"data": str, "model": str, "protocol": str, "measure": str,
           "L": int,                                        # revealed items (0: not on the curve)
           "mean": float, "low": float, "high": float,      # mean NDCG@k and its confidence interval
           "se": float,                                     # standard error over users
           "users": int,                                    # users averaged
           "seconds": float}                                # wall time of the cell (fit + evaluation)


@dataclass(frozen=True)
class FoldInConfig:
    """Data, protocols and model settings of the fold-in study."""
    #: MovieLens ratings below the data folder ("" skips the real data)
    ratings_file: str = "ml-latest-small/ratings.csv"
    min_rating: float = 4.0                 # real data: ratings >= this are positives
    min_item: int = 5                       # real data: keep items with >= this many positive users
    #: the simulated world
    world: WorldConfig = field(default_factory=lambda: WorldConfig(n_users=2000, n_items=1500,
                                                                   offset=-4.0))
    observation_rate: float = 0.5           # SRS rate of the simulated observed sets
    held_out_fraction: float = 0.2          # share of users held out (strong generalisation)
    max_known: int = 50                     # largest number L of revealed interactions
    min_rest: int = 5                       # held-out users need max_known + min_rest interactions
    k: int = 50                             # NDCG cutoff
    weak_test_fraction: float = 0.2         # per-user test share of the weak-generalisation split
    ials_dim: int = 32                      # iALS (AllRank-style) and MF-ADG dimension k
    ials_l2: float = 10.0                   # iALS λ, also of both fold-ins
    ials_unobserved_weight: float = 0.05    # iALS weight of unobserved pairs, also of both fold-ins
    ials_sweeps: int = 8                    # iALS alternating least-squares sweeps
    pairs: int = 400_000                    # MF-ADG (γ = 100): sampled (u, i⁺) pairs
    batch_size: int = 256                   # MF-ADG: sampled pairs per step
    adg_learning_rate: float = 0.1          # MF-ADG: adagrad learning rate
    adg_l2: float = 0.01                    # MF-ADG: L2 λ
    ease_l2: float = 300.0                  # EASE λ
    knn_k: int = 100                        # item-kNN neighbours
    level: float = 0.95                     # confidence level of the bands

    def __post_init__(self):
        for name in ("max_known", "min_rest", "k", "ials_dim", "ials_sweeps", "knn_k", "pairs",
                     "batch_size"):
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
                          max_known=5, min_rest=3, k=10, ials_dim=8, ials_sweeps=3,
                          pairs=20_000, ease_l2=50.0, knn_k=20),
    "default": FoldInConfig(),
    "paper": FoldInConfig(world=WorldConfig(n_users=6000, n_items=3000, offset=-4.6), ials_dim=64,
                          ials_sweeps=15),
}


# ---- setup: every data source, split for both protocols ---------------------------------------

@dataclass(frozen=True)
class Source:
    """A data source split for both protocols. Strong: bool CSR [R * max_known, I] `known` (row
    r * max_known + L - 1: evaluated held-out user r's first L revealed items) and `rest` (the
    others); weak: the training users' per-user split `weak_train` / `weak_test` [U_train, I]."""
    known: sp.csr_matrix
    rest: sp.csr_matrix
    weak_train: sp.csr_matrix
    weak_test: sp.csr_matrix


@dataclass(frozen=True)
class Shared:
    """Every data source of the run, by name (`sources`)."""
    sources: dict[str, Source]


def sources(config: FoldInConfig) -> list[str]:
    """The data sources of a run: the simulated world, and the real data when its file exists."""
    return [SIMULATED] + ([REAL] if real_data_file(config.ratings_file) else [])


def _source_key(key: jax.Array, source: str) -> jax.Array:
    """The key of a data source's splits and fits: ``cell_key(key, {"data": source})``, the key
    of the former one-cell-per-source grid (so the numbers are those of that grid)."""
    return cell_key(key, {"data": source})


def _positives(key, config: FoldInConfig, source: str) -> sp.csr_matrix:
    """Observed positives O+ [U, I] of the real data or of the simulated world."""
    if source == REAL:
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


def prepare(key: jax.Array, config: FoldInConfig, source: str) -> Source:
    """A data source's positives split for both protocols; `key` is `_source_key` (fold_in 0:
    held-out users, 1: reveal order, 3: weak split; 2 is the models')."""
    observed = _positives(key, config, source)
    users = missing.split_users(jax.random.fold_in(key, 0), observed, config.held_out_fraction)
    counts = np.diff(users.held_out.indptr)
    evaluated = users.held_out[counts >= config.max_known + config.min_rest]
    if evaluated.shape[0] < 2:
        raise ValueError(f"{source}: fewer than 2 held-out users have >= max_known + min_rest = "
                         f"{config.max_known + config.min_rest} interactions; lower max_known")
    positions = _reveal_positions(jax.random.fold_in(key, 1), evaluated)
    known, rest = _stacked_reveals(evaluated, positions, config.max_known)
    weak = missing.split_per_user(jax.random.fold_in(key, 3), users.train,
                                  (1 - config.weak_test_fraction, 0.0, config.weak_test_fraction),
                                  n_folds=1)[0]
    return Source(known=known, rest=rest, weak_train=weak.train, weak_test=weak.test)


def setup(key: jax.Array, config: FoldInConfig) -> Shared:
    """Every data source of the run (`prepare`), from the run's root key."""
    return Shared(sources={name: prepare(_source_key(key, name), config, name)
                           for name in sources(config)})


# ---- models ---------------------------------------------------------------------------------

#: the fold_in index of the key of each model that starts from random parameters
MODEL_KEYS = {"iALS": 0, "MF-ADG": 1}


def model_spec(config: FoldInConfig, model: str):
    """The `simrec.models` spec of `model` (one of `MODELS`). iALS and MF-ADG score a history by
    the ridge fold-in with their item factors fixed (module docstring), the other models by
    their item-item weights or counts."""
    if model == "popularity":
        return models.PopularitySpec()
    if model == "iALS":
        return models.IALSSpec(dim=config.ials_dim, l2=config.ials_l2,
                               unobserved_weight=config.ials_unobserved_weight,
                               sweeps=config.ials_sweeps)
    if model == "MF-ADG":
        return models.MFSpec(models.OptADG(dim=config.ials_dim), l2=config.adg_l2,
                             learning_rate=config.adg_learning_rate, optimizer="adagrad",
                             batch_size=config.batch_size,
                             fold_in=models.FoldIn(l2=config.ials_l2,
                                                   unobserved_weight=config.ials_unobserved_weight))
    if model == "EASE":
        return models.EASESpec(l2=config.ease_l2)
    if model == "item-kNN":
        return models.ItemKNNSpec(k=config.knn_k)
    raise ValueError(f"model must be one of {MODELS}, got {model!r}")


def _fit(key, config: FoldInConfig, train: sp.csr_matrix, model: str) -> models.Model:
    """`model` fitted on `train` (`simrec.models.fit`); iALS draws from fold_in(key, 0), MF-ADG
    from fold_in(key, 1) (`MODEL_KEYS`)."""
    spec = model_spec(config, model)
    own = jax.random.fold_in(key, MODEL_KEYS[model]) if model in MODEL_KEYS else None
    pairs = config.pairs if isinstance(spec, models.MFSpec) else None
    return models.fit(own, spec, train, pairs=pairs)


def _history_scorer(model: models.Model):
    """score(history bool CSR [R, I]) -> f32[R, I] of users given by their histories."""
    return lambda history: np.asarray(models.score(model, None, history))


# ---- cells ----------------------------------------------------------------------------------

def cells(config: FoldInConfig) -> list[dict]:
    return [{"data": name, "model": model} for name in sources(config) for model in MODELS]


def _block_scorer(score, histories: sp.csr_matrix):
    """A `metrics.evaluate` score function: a contiguous block of rows -> f32[B, I]."""
    return lambda rows: score(histories[rows[0]:rows[-1] + 1])


def compute(key, config: FoldInConfig, cell: dict, shared: Shared) -> list[dict]:
    """Fit the cell's model on the weak split's training part (key fold_in(`_source_key`, 2));
    strong generalisation: NDCG@k per L (mean, CI over the evaluated new users) and MANDCG;
    weak generalisation: NDCG@k on the held-out part of the training users."""
    started = time.perf_counter()
    source = shared.sources[cell["data"]]
    score = _history_scorer(_fit(jax.random.fold_in(_source_key(key, cell["data"]), 2), config,
                                 source.weak_train, cell["model"]))
    spec = f"ndcg@{config.k}"
    strong = metrics.evaluate(_block_scorer(score, source.known), source.rest, exclude=source.known,
                              metrics=(spec,))[spec].reshape(-1, config.max_known)
    weak = metrics.evaluate(_block_scorer(score, source.weak_train), source.weak_test,
                            exclude=source.weak_train, metrics=(spec,))[spec]
    samples = [("strong", "ndcg", j + 1, strong[:, j]) for j in range(config.max_known)]
    samples += [("strong", "mandcg", 0, strong.mean(axis=1)),
                ("weak", "ndcg", 0, weak[np.isfinite(weak)])]
    seconds = time.perf_counter() - started
    rows = []
    for protocol, measure, reveals, values in samples:
        mean, low, high, se = stats.mean_ci(values, config.level)
        rows.append({**cell, "protocol": protocol, "measure": measure, "L": reveals, "mean": mean,
                     "low": low, "high": high, "se": se, "users": len(values), "seconds": seconds})
    return rows


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


def _tables(config: FoldInConfig, records: pd.DataFrame):
    """(curves, MANDCG table) from the records: the strong NDCG@k curve points, and per data
    source and model MANDCG, the curve's ends, weak NDCG@k, users and cell wall time."""
    curves = records[(records.protocol == "strong") & (records.measure == "ndcg")]
    curves = curves[["data", "model", "L", "mean", "low", "high", "se"]].reset_index(drop=True)
    rows = []
    for (name, model), part in records.groupby(["data", "model"], sort=False):
        strong = part[(part.protocol == "strong") & (part.measure == "ndcg")].set_index("L")
        mandcg = part[part.measure == "mandcg"].iloc[0]
        weak = part[part.protocol == "weak"].iloc[0]
        rows.append({"data": name, "model": model,
                     "MANDCG (strong)": mandcg["mean"], "MANDCG se": mandcg["se"],
                     f"NDCG@{config.k} strong L=1": strong.loc[1, "mean"],
                     f"NDCG@{config.k} strong L={config.max_known}":
                         strong.loc[config.max_known, "mean"],
                     f"NDCG@{config.k} weak": weak["mean"], "weak se": weak["se"],
                     "evaluated users": mandcg["users"], "cell wall time (s)": mandcg["seconds"]})
    return curves, pd.DataFrame(rows)


def report(config: FoldInConfig, records: pd.DataFrame) -> Report:
    import matplotlib.pyplot as plt
    import seaborn as sns

    curves, table = _tables(config, records)
    crossings = pd.DataFrame(_crossings(curves),
                             columns=["data", "model a", "model b", "L", "leader before",
                                      "leader after", "clear"])

    sns.set_theme(style="whitegrid", context="paper")
    names = list(dict.fromkeys(table.data))
    fig, axes = plt.subplots(1, len(names), figsize=(5.2 * len(names), 3.9), squeeze=False)
    palette = dict(zip(MODELS, sns.color_palette("tab10", len(MODELS))))
    for ax, name in zip(axes[0], names):
        part = curves[curves.data == name]
        for model in MODELS:
            line = part[part.model == model]
            ax.plot(line.L, line["mean"], color=palette[model], label=model)
            ax.fill_between(line.L, line.low, line.high, color=palette[model], alpha=0.2)
        ax.set_xlabel("L (revealed interactions of a new user)")
        ax.set_ylabel(f"mean NDCG@{config.k} on the rest")
        users = int(table[table.data == name]["evaluated users"].iloc[0])
        ax.set_title(f"{name} ({users} held-out users, {config.level:.0%} CI)", fontsize=9)
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
                     f"fitted and evaluated in {part['cell wall time (s)'].sum():.0f} s): "
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
    presets=PRESETS, cells=cells, setup=setup, compute=compute, report=report, columns=COLUMNS,
    expected_seconds={"smoke": 9, "default": 24, "paper": 120})
