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
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from collections.abc import Mapping

import jax
import numpy as np
import pandas as pd
import scipy.sparse as sp

from simrec import data, metrics, missing, models, stats
from simrec.runner import Report, Study, cell_key, shared_key
from simrec.world import WorldConfig, make_world
from simrec.datafiles import data_file, skipped_note

#: Jeunen et al. KDD'24 App. A on MovieLens-1M (their public notebook's printed values)
PAPER = {"pearson": 0.6325, "kendall": 0.4973, "inversion_rate": 0.2514}
REAL_DATA = "ml-latest-small"


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
        if not 0 < self.train_fraction < 1:
            raise ValueError(f"train_fraction must be in (0, 1), got {self.train_fraction}")
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
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")
        if self.min_item < 1:
            raise ValueError(f"min_item must be >= 1, got {self.min_item}")
        if not 0 < self.observation_mean < 1 or self.observation_concentration <= 0:
            raise ValueError(f"observation_mean must be in (0, 1) and observation_concentration "
                             f"> 0, got {self.observation_mean}, {self.observation_concentration}")
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


# ---- data sets (setup) ----------------------------------------------------------------------

@dataclass(frozen=True)
class Dataset:
    """One data set: the per-user train/test split and, simulated only, the truth and the
    controlled-count held-out sets."""
    train: sp.csr_matrix                              # bool[U, I], the models' training half
    test: sp.csr_matrix                               # bool[U, I], the observed held-out half
    complete: sp.csr_matrix | None = None             # bool[U, I], P+ minus train (simulated)
    held_out: Mapping[float, sp.csr_matrix] = field(default_factory=dict)  # {s: bool[U, I]}
    held_out_sizes: Mapping[float, np.ndarray] = field(default_factory=dict)  # {s: int[eligible users]}


@dataclass(frozen=True)
class Shared:
    """Every cell's data set, by the cell's ``data`` name."""
    datasets: Mapping[str, Dataset]


def _movielens(key, config: DisagreementConfig) -> Dataset:
    """The real data's positives (ratings >= min_rating, then items with >= min_item users),
    split per user with ``key``."""
    raw = data.load_interactions(data_file(config.ratings_file))
    kept = data.filter_min_counts(data.filter_ratings(raw, config.min_rating),
                                  min_item=config.min_item)
    split = missing.split_per_user(key, kept.ratings.astype(bool),
                                   (config.train_fraction, 0.0, 1 - config.train_fraction),
                                   n_folds=1)[0]
    return Dataset(train=split.train, test=split.test)


def _simulated(key, config: DisagreementConfig) -> Dataset:
    """The simulated world's split, its truth (P+ minus train) and its held-out sets of
    controlled size (module docstring), all from `shared_key`s of the run's root ``key``."""
    world = make_world(shared_key(key, "world"), config.world)
    prior = missing.prior_relevant(shared_key(key, "prior"), world)
    rates = missing.user_rates(shared_key(key, "rates"), world.n_users, config.observation_mean,
                               config.observation_concentration)
    observed = missing.observe_srs(shared_key(key, "observe"), prior, np.asarray(rates))
    split = missing.split_per_user(shared_key(key, "split"), observed,
                                   (config.train_fraction, 0.0, 1 - config.train_fraction),
                                   n_folds=1)[0]
    complete = (prior.astype(np.int8) - prior.multiply(split.train).astype(np.int8)) > 0
    complete = sp.csr_matrix(complete, dtype=bool)
    available = np.diff(complete.indptr)
    eligible = available >= config.held_out_max
    z = np.asarray(jax.random.normal(shared_key(key, "held-out sizes"), (world.n_users,)))
    order_key = shared_key(key, "held-out order")     # one item order: sets nested across s
    held_out, sizes = {}, {}
    for spread in config.spreads:
        size = np.rint(config.held_out_mean * np.exp(spread * z - spread ** 2 / 2))
        size = np.where(eligible, np.clip(size, 1, config.held_out_max), 0)
        rate = np.divide(size, available, out=np.zeros(len(size)), where=available > 0)
        held_out[spread] = missing.observe_srs(order_key, complete, rate)
        sizes[spread] = np.diff(held_out[spread].indptr)[eligible]
    return Dataset(train=split.train, test=split.test, complete=complete, held_out=held_out,
                   held_out_sizes=sizes)


def cells(config: DisagreementConfig) -> list[dict]:
    out = [{"data": "simulated"}]
    if data_file(config.ratings_file):
        out.insert(0, {"data": REAL_DATA})
    return out


def setup(key, config: DisagreementConfig) -> Shared:
    """Every cell's data set: the real data split with its cell's `cell_key`, the simulated one
    from the run's `shared_key`s."""
    datasets = {}
    for cell in cells(config):
        datasets[cell["data"]] = (_movielens(cell_key(key, cell), config) if cell["data"] == REAL_DATA
                                  else _simulated(key, config))
    return Shared(datasets=datasets)


# ---- models ---------------------------------------------------------------------------------

def _model_specs(config: DisagreementConfig) -> list[models.Spec]:
    """The EASE grid (lambda in ease_l2s), then the KUNN grid (Ku, Ki in kunn_ks x kunn_ks)."""
    return ([models.EASESpec(l2) for l2 in config.ease_l2s]
            + [models.KUNNSpec(ku, ki) for ku in config.kunn_ks for ki in config.kunn_ks])


# ---- records --------------------------------------------------------------------------------

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


def _record(data_name: str, part: str, statistic: str, value, *, spec: models.Spec | None = None,
            target: str = "", spread: float = math.nan) -> dict:
    ease = isinstance(spec, models.EASESpec)
    kunn = isinstance(spec, models.KUNNSpec)
    return {"data": data_name, "part": part, "family": "EASE" if ease else "KUNN" if kunn else "",
            "l2": spec.l2 if ease else math.nan, "user_k": spec.user_k if kunn else 0,
            "item_k": spec.item_k if kunn else 0, "target": target, "spread": spread,
            "statistic": statistic, "value": float(value)}


def compute(key, config: DisagreementConfig, cell: dict, shared: Shared) -> list[dict]:
    """Per model, DCG@k and nDCG@k on the held-out half (and, simulated, on the complete data and
    on every controlled-count held-out set); plus the data sizes and the wall time of fitting and
    scoring every model."""
    name, dataset = cell["data"], shared.datasets[cell["data"]]
    targets = [("observed test", math.nan, dataset.test)]
    if dataset.complete is not None:
        targets.append(("complete", math.nan, dataset.complete))
    targets += [("held-out", s, dataset.held_out[s]) for s in dataset.held_out]
    started = time.perf_counter()
    out = []
    for model in models.fit_grid(None, _model_specs(config), dataset.train):  # closed forms: no key
        scores = np.asarray(models.score(model, np.arange(dataset.train.shape[0])))
        for target, spread, relevant in targets:
            values = metrics.evaluate(scores, relevant, exclude=dataset.train,
                                      metrics=config.metric_specs)
            out += [_record(name, "model", metric, metrics.mean(v), spec=model.spec, target=target,
                            spread=spread) for metric, v in values.items()]
    wall = time.perf_counter() - started
    sizes = {"users": dataset.train.shape[0], "items": dataset.train.shape[1],
             "train interactions": dataset.train.nnz, "test interactions": dataset.test.nnz,
             "wall time (s)": wall}
    out += [_record(name, "data", statistic, value) for statistic, value in sizes.items()]
    for s, n in dataset.held_out_sizes.items():
        out += [_record(name, "held-out sizes", statistic, value, target="held-out", spread=s)
                for statistic, value in (("users", len(n)), ("mean", n.mean()), ("sd", n.std()))]
    return out


# ---- report ---------------------------------------------------------------------------------

def _agreement(dcg, ndcg) -> dict:
    r, _ = stats.pearson(dcg, ndcg)
    tau, _ = stats.kendall_tau(dcg, ndcg)
    return {"pearson": float(r), "kendall": float(tau),
            "inversion_rate": stats.pairwise_inversion_rate(dcg, ndcg)}


def _param(row) -> str:
    """A model's label in the tables: ``lambda=L`` (EASE) or ``Ku=a,Ki=b`` (KUNN)."""
    return f"lambda={row.l2:g}" if row.family == "EASE" else f"Ku={row.user_k},Ki={row.item_k}"


def _metric_columns(config, part: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(DCG@k, nDCG@k) of every model in fit order, from one target's "model" records."""
    dcg, ndcg = config.metric_specs
    return (part[part.statistic == dcg].value.to_numpy(),
            part[part.statistic == ndcg].value.to_numpy())


def _frame(config, records: pd.DataFrame) -> pd.DataFrame:
    """One data set's models: [data, family, param, dcg@k, ndcg@k(, true dcg@k, true ndcg@k)]."""
    dcg, ndcg = config.metric_specs
    scored = records[records.part == "model"]
    observed = scored[scored.target == "observed test"]
    first = observed[observed.statistic == dcg]
    frame = pd.DataFrame({"data": first.data.to_numpy(), "family": first.family.to_numpy(),
                          "param": [_param(row) for row in first.itertuples()]})
    frame[dcg], frame[ndcg] = _metric_columns(config, observed)
    complete = scored[scored.target == "complete"]
    if len(complete):
        frame[f"true {dcg}"], frame[f"true {ndcg}"] = _metric_columns(config, complete)
    return frame


def report(config: DisagreementConfig, records: pd.DataFrame) -> Report:
    import matplotlib.pyplot as plt
    import seaborn as sns

    dcg, ndcg = config.metric_specs
    summary_rows, spread_rows, frames = [], [], []
    for data_name, part in records.groupby("data", sort=False):
        frame = _frame(config, part)
        frames.append(frame)
        size = part[part.part == "data"].set_index("statistic").value
        row = {"data": data_name, "users": int(size["users"]), "items": int(size["items"]),
               "train": int(size["train interactions"]), "test": int(size["test interactions"]),
               "models": len(frame), **_agreement(frame[dcg], frame[ndcg])}
        if f"true {dcg}" in frame:
            truth = frame[f"true {dcg}"]
            row["tau(DCG, true DCG)"] = stats.kendall_tau(frame[dcg], truth)[0]
            row["tau(nDCG, true DCG)"] = stats.kendall_tau(frame[ndcg], truth)[0]
            row["inv(DCG, true DCG)"] = stats.pairwise_inversion_rate(frame[dcg], truth)
            row["inv(nDCG, true DCG)"] = stats.pairwise_inversion_rate(frame[ndcg], truth)
            row["tau(nDCG, true nDCG)"] = stats.kendall_tau(frame[ndcg], frame[f"true {ndcg}"])[0]
            held_out = part[part.target == "held-out"]
            for s in config.spreads:
                at = held_out.spread == s
                d, n = _metric_columns(config, held_out[at & (held_out.part == "model")])
                counts = held_out[at & (held_out.part == "held-out sizes")].set_index("statistic").value
                spread_rows.append({"spread s": s, "users": int(counts["users"]),
                                    "mean held-out": counts["mean"], "sd held-out": counts["sd"],
                                    "cv held-out": counts["sd"] / counts["mean"],
                                    **_agreement(d, n),
                                    "tau(DCG, true DCG)": stats.kendall_tau(d, truth)[0],
                                    "tau(nDCG, true DCG)": stats.kendall_tau(n, truth)[0]})
        row["wall time (s)"] = size["wall time (s)"]
        summary_rows.append(row)
    summary_rows.append({"data": "MovieLens-1M (Jeunen App. A)", "models": 192, **PAPER})
    summary = pd.DataFrame(summary_rows)
    spread = pd.DataFrame(spread_rows)
    models_table = pd.concat(frames, ignore_index=True)

    with sns.axes_style("whitegrid"), sns.plotting_context("paper"), sns.color_palette("deep"):
        fig_scatter, axes = plt.subplots(1, len(frames), figsize=(5.0 * len(frames), 4.0), squeeze=False)
        for ax, frame, row in zip(axes[0], frames, summary_rows):
            sns.regplot(data=frame, x=dcg, y=ndcg, ax=ax, scatter=False, color="black",
                        line_kws={"lw": 1}, seed=0)          # seeded bootstrap: a reproducible band
            sns.scatterplot(data=frame, x=dcg, y=ndcg, hue="family", s=14, ax=ax)
            ax.set_title(f"{row['data']}: r = {row['pearson']:.2f}, tau = {row['kendall']:.2f}, "
                         f"P(inv) = {row['inversion_rate']:.0%}", fontsize=8)
        fig_scatter.tight_layout()
        figures = {"fig_scatter": fig_scatter}
        if len(spread):
            fig_spread, ax = plt.subplots(figsize=(5.0, 3.6))
            ax.plot(spread["cv held-out"], spread["inversion_rate"], marker="o",
                    label="P(DCG, nDCG order differ)")
            ax.plot(spread["cv held-out"], (1 - spread["kendall"]) / 2, ls="--", label="(1 - tau) / 2")
            ax.set_xlabel("coefficient of variation of held-out items per user")
            ax.set_ylabel("pairwise inversion rate")
            ax.set_title("Simulated: disagreement vs variability of |held-out|", fontsize=9)
            ax.legend(fontsize=7)
            fig_spread.tight_layout()
            figures["fig_spread"] = fig_spread
    text = _summary_text(config, summary, spread)
    return Report(tables={"table_summary": summary, "table_spread": spread,
                          "table_models": models_table}, figures=figures, summary=text)


def _summary_text(config, summary, spread) -> str:
    lines = [f"{len(config.ease_l2s)} EASE (lambda {min(config.ease_l2s):g}..{max(config.ease_l2s):g}) "
             f"+ {len(config.kunn_ks) ** 2} KUNN (Ku, Ki in {list(config.kunn_ks)}) models, "
             f"DCG@{config.k} vs nDCG@{config.k} on a per-user "
             f"{1 - config.train_fraction:.0%} held-out split.", ""]
    for row in summary.to_dict("records"):
        line = (f"- {row['data']}: Pearson {row['pearson']:.3f}, Kendall {row['kendall']:.3f}, "
                f"P(inversion) {row['inversion_rate']:.1%}")
        if isinstance(row.get("wall time (s)"), float) and math.isfinite(row["wall time (s)"]):
            seconds = row["wall time (s)"]
            line += f" (all {row['models']} models fitted and scored in {seconds:.0f} s wall time on 2 CPU cores)"
        if isinstance(row.get("tau(DCG, true DCG)"), float) and math.isfinite(row["tau(DCG, true DCG)"]):
            line += (f"; Kendall tau against the true (complete-data) DCG: DCG {row['tau(DCG, true DCG)']:.3f},"
                     f" nDCG {row['tau(nDCG, true DCG)']:.3f}")
        lines.append(line)
    if REAL_DATA not in set(summary["data"]):
        lines.append(skipped_note(config.ratings_file))
    if len(spread):
        lo, hi = spread.iloc[0], spread.iloc[-1]
        lines.append(f"- Controlled held-out counts (simulated): spread s = {lo['spread s']:g} "
                     f"(cv {lo['cv held-out']:.2f}) gives P(inversion) {lo['inversion_rate']:.1%}; "
                     f"s = {hi['spread s']:g} (cv {hi['cv held-out']:.2f}) gives "
                     f"{hi['inversion_rate']:.1%}.")
    lines += ["", _verdict(config, summary, spread)]
    return "\n".join(lines)


#: Kendall tau differences below this are reported as "no closer" (a tie, not a winner)
TAU_TIE = 0.01


def _closer(tau_dcg: float, tau_ndcg: float) -> str:
    """Which metric's model order is closer to the truth's, by Kendall tau (`TAU_TIE`)."""
    if abs(tau_dcg - tau_ndcg) < TAU_TIE:
        return "neither"
    return "DCG" if tau_dcg > tau_ndcg else "nDCG"


def _verdict(config, summary: pd.DataFrame, spread: pd.DataFrame) -> str:
    """The study's verdict on DCG vs nDCG model orderings, with the numbers behind it."""
    rows = summary.set_index("data")
    observed = [name for name in rows.index if name != "MovieLens-1M (Jeunen App. A)"]
    parts = [f"**Verdict.** DCG@{config.k} and nDCG@{config.k} order the same {int(rows.iloc[0]['models'])} "
             "models differently for " + ", ".join(
                 f"{rows.loc[name, 'inversion_rate']:.1%} of model pairs on {name} (Kendall "
                 f"{rows.loc[name, 'kendall']:.3f})" for name in observed)
             + f", against {PAPER['inversion_rate']:.1%} on MovieLens-1M (Jeunen et al., App. A)"]
    truth = [name for name in observed
             if math.isfinite(rows.loc[name].get("tau(DCG, true DCG)", math.nan))]
    for name in truth:
        r = rows.loc[name]
        closer = _closer(r["tau(DCG, true DCG)"], r["tau(nDCG, true DCG)"])
        parts.append(
            f"Where the true utility is known ({name}), "
            + ("neither metric orders the models measurably closer to it" if closer == "neither"
               else f"{closer} orders the models closer to it")
            + f": Kendall tau against the complete-data DCG@{config.k} is {r['tau(DCG, true DCG)']:.3f} for "
            f"DCG and {r['tau(nDCG, true DCG)']:.3f} for nDCG (inverted pairs "
            f"{r['inv(DCG, true DCG)']:.1%} vs {r['inv(nDCG, true DCG)']:.1%}; differences below "
            f"{TAU_TIE:g} in tau count as a tie)" + (
                ", so on this data the choice between them does not pick better models"
                if closer == "neither" else ""))
    if len(spread):
        lo, hi = spread.iloc[0], spread.iloc[-1]
        groups = {}
        for _, r in spread.iterrows():
            groups.setdefault(_closer(r["tau(DCG, true DCG)"], r["tau(nDCG, true DCG)"]),
                              []).append(f"{r['spread s']:g}")
        parts.append(
            f"In the controlled experiment the disagreement grows with the spread of held-out counts: "
            f"{lo['inversion_rate']:.1%} of "
            f"pairs at equal counts (s = {lo['spread s']:g}), {hi['inversion_rate']:.1%} at cv "
            f"{hi['cv held-out']:.2f}; which metric is closer to the truth there depends on the "
            "spread (" + "; ".join(
                f"{'within ' + format(TAU_TIE, 'g') if who == 'neither' else who + ' closer'} at "
                f"s = {', '.join(values)}" for who, values in groups.items()) + ")")
    return ". ".join(parts) + "."


STUDY = Study(
    name="disagreement",
    description="Jeunen et al. App. A: DCG@100 and nDCG@100 disagree on the ordering of 192 EASE/"
                "KUNN models; in simulation, which one tracks the true utility, and how the "
                "disagreement grows with the variability of held-out counts",
    presets=PRESETS, cells=cells, setup=setup, compute=compute, report=report, columns=COLUMNS,
    data_files=lambda config: [config.ratings_file], expected_seconds={"smoke": 10, "default": 70, "paper": 450})
