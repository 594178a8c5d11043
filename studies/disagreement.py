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

import functools
import math
import time
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pandas as pd
import scipy.sparse as sp

from simrec import data, metrics, missing, models, stats
from simrec.runner import Report, Study, cell_key, key_id, shared_key
from simrec.world import WorldConfig, make_world
from studies._data import real_data_file, skipped_note

matplotlib.use("Agg")

#: Jeunen et al. KDD'24 App. A on MovieLens-1M (their public notebook's printed values)
PAPER = {"pearson": 0.6325, "kendall": 0.4973, "inversion_rate": 0.2514}
#: the issue's budget for the 192-model study on ml-latest-small (2-core CPU)
TIME_BUDGET_S = 180.0


@dataclass(frozen=True)
class DisagreementConfig:
    """ratings_file: MovieLens ratings below `studies._data.DATA_ROOT` ("" skips the real data); min_rating,
    min_item: positives are ratings >= min_rating, then items with >= min_item users;
    train_fraction: per-user share of the interactions used for training (the rest is test);
    ease_l2s: EASE^R lambdas; kunn_ks: KUNN neighbourhood sizes (Ku and Ki both range over it);
    k: cutoff of DCG@k / nDCG@k; world: the simulated world (truth q(u, i), P+ ~ Bernoulli(q));
    observation_mean, observation_concentration: per-user SRS rates rate_u ~ Beta with this mean
    and concentration (so |O+_u| varies between users, as in real data);
    held_out_mean, held_out_max, spreads: held-out sizes m, n_max and log-normal spreads s of the
    controlled-count experiment (users with fewer than n_max held-out candidates are left out)."""
    ratings_file: str = "ml-latest-small/ratings.csv"
    min_rating: float = 4.0
    min_item: int = 5
    train_fraction: float = 0.5
    ease_l2s: tuple[float, ...] = tuple(float(x) for x in range(500, 1601, 10))
    kunn_ks: tuple[int, ...] = tuple(range(70, 111, 5))
    k: int = 100
    world: WorldConfig = field(default_factory=lambda: WorldConfig(n_users=1000, n_items=1500,
                                                                   offset=-4.5))
    observation_mean: float = 0.3
    observation_concentration: float = 4.0
    held_out_mean: int = 10
    held_out_max: int = 40
    spreads: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5)

    def __post_init__(self):
        if not 0 < self.train_fraction < 1:
            raise ValueError(f"train_fraction must be in (0, 1), got {self.train_fraction}")
        if not self.ease_l2s or any(not (math.isfinite(x) and x > 0) for x in self.ease_l2s):
            raise ValueError(f"ease_l2s must be non-empty and > 0, got {self.ease_l2s}")
        if not self.kunn_ks or any(k < 1 for k in self.kunn_ks):
            raise ValueError(f"kunn_ks must be non-empty integers >= 1, got {self.kunn_ks}")
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


# ---- data and models --------------------------------------------------------------------------

def _movielens(config: DisagreementConfig) -> sp.csr_matrix:
    """Positives of the real data: ratings >= min_rating, then items with >= min_item users."""
    raw = data.load_interactions(real_data_file(config.ratings_file))
    kept = data.filter_min_counts(data.filter_ratings(raw, config.min_rating),
                                  min_item=config.min_item)
    return kept.ratings.astype(bool)


def _model_scorers(config: DisagreementConfig, train: sp.csr_matrix):
    """[(family, parameter label, score_block)] for the EASE grid and the KUNN grid."""
    out = [("EASE", f"lambda={l2:g}", functools.partial(models.ease_scores, model))
           for l2, model in zip(config.ease_l2s, models.ease_grid(train, config.ease_l2s))]
    grid = models.kunn_grid(train, config.kunn_ks, config.kunn_ks)
    out += [("KUNN", f"Ku={ku},Ki={ki}", functools.partial(models.kunn_scores, model))
            for (ku, ki), model in grid.items()]
    return out


def _means(values: dict) -> dict:
    return {spec: metrics.mean(v) for spec, v in values.items()}


# ---- the simulated world and its controlled-count held-out sets --------------------------------

@functools.lru_cache(maxsize=2)
def _simulated(root_id: tuple, config: DisagreementConfig):
    """(train, observed test, complete test P+ minus train, {spread: held-out set}, sizes)."""
    root = jax.random.wrap_key_data(jnp.asarray(root_id, dtype=jnp.uint32))
    world = make_world(shared_key(root, "world"), config.world)
    prior = missing.prior_relevant(shared_key(root, "prior"), world)
    rates = missing.user_rates(shared_key(root, "rates"), world.n_users, config.observation_mean,
                               config.observation_concentration)
    observed = missing.observe_srs(shared_key(root, "observe"), prior, np.asarray(rates))
    split = missing.split_per_user(shared_key(root, "split"), observed,
                                   (config.train_fraction, 0.0, 1 - config.train_fraction),
                                   n_folds=1)[0]
    complete = (prior.astype(np.int8) - prior.multiply(split.train).astype(np.int8)) > 0
    complete = sp.csr_matrix(complete, dtype=bool)
    available = np.diff(complete.indptr)
    eligible = available >= config.held_out_max
    z = np.asarray(jax.random.normal(shared_key(root, "held-out sizes"), (world.n_users,)))
    order_key = shared_key(root, "held-out order")     # one item order: sets nested across s
    held_out, sizes = {}, {}
    for spread in config.spreads:
        size = np.rint(config.held_out_mean * np.exp(spread * z - spread ** 2 / 2))
        size = np.where(eligible, np.clip(size, 1, config.held_out_max), 0)
        rate = np.divide(size, available, out=np.zeros(len(size)), where=available > 0)
        held_out[spread] = missing.observe_srs(order_key, complete, rate)
        sizes[spread] = np.diff(held_out[spread].indptr)[eligible]
    return split, complete, held_out, sizes


# ---- cells ----------------------------------------------------------------------------------

def cells(config: DisagreementConfig) -> list[dict]:
    out = [{"data": "simulated"}]
    if real_data_file(config.ratings_file):
        out.insert(0, {"data": "ml-latest-small"})
    return out


def compute(key, config: DisagreementConfig, cell: dict) -> dict:
    """Per model, DCG@k and nDCG@k on the held-out half (and, simulated, on the complete data and
    on every controlled-count held-out set); plus the data sizes and the wall time."""
    started = time.perf_counter()
    specs = config.metric_specs
    if cell["data"] == "ml-latest-small":
        positives = _movielens(config)
        split = missing.split_per_user(cell_key(key, cell), positives,
                                       (config.train_fraction, 0.0, 1 - config.train_fraction),
                                       n_folds=1)[0]
        targets = {"obs": split.test}
    else:
        split, complete, held_out, sizes = _simulated(key_id(key), config)
        targets = {"obs": split.test, "complete": complete,
                   **{f"spread {s:g}": held_out[s] for s in config.spreads}}
    rows = []
    for family, param, score_block in _model_scorers(config, split.train):
        scores = np.asarray(score_block(np.arange(split.train.shape[0])))
        row = {"family": family, "param": param}
        for name, relevant in targets.items():
            row[name] = _means(metrics.evaluate(scores, relevant, exclude=split.train,
                                                metrics=specs))
        rows.append(row)
    out = {"models": rows, "users": int(split.train.shape[0]), "items": int(split.train.shape[1]),
           "train_interactions": int(split.train.nnz), "test_interactions": int(split.test.nnz),
           "wall_time_s": time.perf_counter() - started}
    if cell["data"] == "simulated":
        out["held_out_sizes"] = {f"{s:g}": {"users": int(len(n)), "mean": float(n.mean()),
                                            "sd": float(n.std())} for s, n in sizes.items()}
    return out


# ---- report ---------------------------------------------------------------------------------

def _agreement(dcg, ndcg) -> dict:
    r, _ = stats.pearson(dcg, ndcg)
    tau, _ = stats.kendall_tau(dcg, ndcg)
    return {"pearson": float(r), "kendall": float(tau),
            "inversion_rate": stats.pairwise_inversion_rate(dcg, ndcg)}


def _frame(config, result) -> pd.DataFrame:
    dcg, ndcg = config.metric_specs
    rows = []
    for m in result.value["models"]:
        row = {"data": result.cell["data"], "family": m["family"], "param": m["param"],
               dcg: m["obs"][dcg], ndcg: m["obs"][ndcg]}
        if "complete" in m:
            row[f"true {dcg}"] = m["complete"][dcg]
            row[f"true {ndcg}"] = m["complete"][ndcg]
        rows.append(row)
    return pd.DataFrame(rows)


def report(config: DisagreementConfig, results) -> Report:
    import matplotlib.pyplot as plt
    import seaborn as sns

    dcg, ndcg = config.metric_specs
    summary_rows, spread_rows, frames = [], [], []
    for r in results:
        frame = _frame(config, r)
        frames.append(frame)
        row = {"data": r.cell["data"], "users": r.value["users"], "items": r.value["items"],
               "train": r.value["train_interactions"], "test": r.value["test_interactions"],
               "models": len(frame), **_agreement(frame[dcg], frame[ndcg])}
        if f"true {dcg}" in frame:
            truth = frame[f"true {dcg}"]
            row[f"tau(DCG, true DCG)"] = stats.kendall_tau(frame[dcg], truth)[0]
            row[f"tau(nDCG, true DCG)"] = stats.kendall_tau(frame[ndcg], truth)[0]
            row[f"inv(DCG, true DCG)"] = stats.pairwise_inversion_rate(frame[dcg], truth)
            row[f"inv(nDCG, true DCG)"] = stats.pairwise_inversion_rate(frame[ndcg], truth)
            row[f"tau(nDCG, true nDCG)"] = stats.kendall_tau(frame[ndcg], frame[f"true {ndcg}"])[0]
            for s in config.spreads:
                name = f"spread {s:g}"
                d = np.array([m[name][dcg] for m in r.value["models"]])
                n = np.array([m[name][ndcg] for m in r.value["models"]])
                size = r.value["held_out_sizes"][f"{s:g}"]
                spread_rows.append({"spread s": s, "users": size["users"],
                                    "mean held-out": size["mean"], "sd held-out": size["sd"],
                                    "cv held-out": size["sd"] / size["mean"],
                                    **_agreement(d, n),
                                    "tau(DCG, true DCG)": stats.kendall_tau(d, truth)[0],
                                    "tau(nDCG, true DCG)": stats.kendall_tau(n, truth)[0]})
        row["wall time (s)"] = r.value["wall_time_s"]
        summary_rows.append(row)
    summary_rows.append({"data": "MovieLens-1M (Jeunen App. A)", "models": 192, **PAPER})
    summary = pd.DataFrame(summary_rows)
    spread = pd.DataFrame(spread_rows)
    models_table = pd.concat(frames, ignore_index=True)

    sns.set_theme(style="whitegrid", context="paper")
    fig_scatter, axes = plt.subplots(1, len(frames), figsize=(5.0 * len(frames), 4.0), squeeze=False)
    for ax, frame, row in zip(axes[0], frames, summary_rows):
        sns.regplot(data=frame, x=dcg, y=ndcg, ax=ax, scatter=False, color="black",
                    line_kws={"lw": 1})
        sns.scatterplot(data=frame, x=dcg, y=ndcg, hue="family", s=14, ax=ax)
        ax.set_title(f"{row['data']}: r = {row['pearson']:.2f}, tau = {row['kendall']:.2f}, "
                     f"P(inv) = {row['inversion_rate']:.0%}", fontsize=8)
    fig_scatter.tight_layout()
    figures = {"fig_scatter": fig_scatter}
    if len(spread):
        fig_spread, ax = plt.subplots(figsize=(5.0, 3.6))
        ax.plot(spread["cv held-out"], spread["inversion_rate"], marker="o", label="P(DCG, nDCG order differ)")
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
            line += f" (all {row['models']} models fitted and scored in {seconds:.0f} s wall time"
            if row["data"] == "ml-latest-small":
                line += (f", {'within' if seconds <= TIME_BUDGET_S else 'OVER'} the issue's "
                         f"{TIME_BUDGET_S / 60:g}-minute budget; 2-core machine shared with "
                         "other jobs")
            line += ")"
        if isinstance(row.get("tau(DCG, true DCG)"), float) and math.isfinite(row["tau(DCG, true DCG)"]):
            line += (f"; Kendall tau against the true (complete-data) DCG: DCG {row['tau(DCG, true DCG)']:.3f},"
                     f" nDCG {row['tau(nDCG, true DCG)']:.3f}")
        lines.append(line)
    if "ml-latest-small" not in set(summary["data"]):
        lines.append(skipped_note(config.ratings_file))
    if len(spread):
        lo, hi = spread.iloc[0], spread.iloc[-1]
        lines.append(f"- Controlled held-out counts (simulated): spread s = {lo['spread s']:g} "
                     f"(cv {lo['cv held-out']:.2f}) gives P(inversion) {lo['inversion_rate']:.1%}; "
                     f"s = {hi['spread s']:g} (cv {hi['cv held-out']:.2f}) gives "
                     f"{hi['inversion_rate']:.1%}.")
    return "\n".join(lines)


STUDY = Study(
    name="disagreement",
    description="Jeunen et al. App. A: DCG@100 and nDCG@100 disagree on the ordering of 192 EASE/"
                "KUNN models; in simulation, which one tracks the true utility, and how the "
                "disagreement grows with the variability of held-out counts",
    presets=PRESETS, cells=cells, compute=compute, report=report, source=__file__,
    report_helpers=(_agreement, _frame, _summary_text))
