"""Study ``unbiasedness``: which top-N metrics survive missing data (Lim et al. RecSys'15, Thm 1-2).

A world gives every user a prior-relevant set P+ (what they would like); the evaluator only sees
O+, a simple random sample of P+ of unknown size (Lim §2). For fixed scorers — a noisy oracle
(the true logit plus Gaussian noise) and a popularity scorer (item counts, so it ties a lot) — the
study draws many O+ per observation rate and compares each metric on O+ with the same metric on
the complete P+:

* Thm 1: E[ADG_obs] = ADG_comp; Recall@K and ATOP are unbiased for the same reason (each is an
  average over relevant items of a quantity that depends only on the item's rank);
* Thm 2: NDCG_obs is biased, E[NDCG_obs] = |O| IDCG(|P|) / (|P| IDCG(|O|)) NDCG_comp per user;
* AP, AUC and truncated nDCG@K carry no such guarantee;
* and, beyond the paper, under popularity-biased (MNAR) observation ADG stops being unbiased:
  the table and figure show by how much as the bias strength beta grows.

Expectations are over observation draws with the world, P+ and the scorers fixed, so each claim is
checked with a z-score against the standard error of the mean over draws.
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

from simrec import metrics, missing
from simrec.runner import Report, Study, cell_key, key_id, shared_key
from simrec.world import WorldConfig, make_world, quality_logit

matplotlib.use("Agg")

SCORERS = ("noisy_oracle", "popularity")
UNBIASED = ("adg", "recall@{k}", "atop")          # Thm 1 and its siblings
Z_LIMIT = 3.0                                     # |z| above this rejects "obs = claim"


@dataclass(frozen=True)
class UnbiasednessConfig:
    """world: the simulated world; rates: SRS observation rates; draws: O+ draws per cell;
    oracle_noise: sd of the Gaussian noise added to the true logit; k: cutoff of Recall/nDCG@k;
    mnar_rate, mnar_betas: rate and strengths of popularity-biased observation (beta = 0 is SRS)."""
    world: WorldConfig = field(default_factory=lambda: WorldConfig(n_users=2000, n_items=1000, offset=-6.0))
    rates: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    draws: int = 100
    oracle_noise: float = 1.5
    k: int = 10
    mnar_rate: float = 0.3
    mnar_betas: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0)

    def __post_init__(self):
        if not self.rates or any(not 0 < r <= 1 for r in self.rates):
            raise ValueError(f"rates must be non-empty and in (0, 1], got {self.rates}")
        if self.draws < 2:
            raise ValueError(f"draws must be >= 2 (a standard error needs two), got {self.draws}")
        if not (math.isfinite(self.oracle_noise) and self.oracle_noise >= 0):
            raise ValueError(f"oracle_noise must be finite and >= 0, got {self.oracle_noise}")
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")
        if not 0 < self.mnar_rate <= 1:
            raise ValueError(f"mnar_rate must be in (0, 1], got {self.mnar_rate}")
        if any(not math.isfinite(b) for b in self.mnar_betas):
            raise ValueError(f"mnar_betas must be finite, got {self.mnar_betas}")

    @property
    def metric_specs(self) -> tuple[str, ...]:
        return ("adg", "ndcg", f"recall@{self.k}", "atop", "ap", "auc", f"ndcg@{self.k}")


PRESETS = {
    "smoke": UnbiasednessConfig(world=WorldConfig(n_users=200, n_items=150, offset=-4.0),
                                rates=(0.2, 0.5, 1.0), draws=8, mnar_betas=(0.0, 1.0)),
    "default": UnbiasednessConfig(),
    "paper": UnbiasednessConfig(world=WorldConfig(n_users=5000, n_items=3000, offset=-7.0),
                                draws=400, mnar_betas=(0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0)),
}


# ---- shared state: world, P+, scorers and their complete-data metrics (memoised per run) ----------

@functools.lru_cache(maxsize=4)
def _shared(root_id: tuple, config: UnbiasednessConfig):
    root = jax.random.wrap_key_data(jnp.asarray(root_id, dtype=jnp.uint32))
    world = make_world(shared_key(root, "world"), config.world)
    prior = missing.prior_relevant(shared_key(root, "prior"), world)
    noise_key = shared_key(root, "oracle noise")
    users = jnp.arange(world.n_users)
    logit = quality_logit(world, users)
    noise = jax.vmap(lambda u: jax.random.normal(jax.random.fold_in(noise_key, u), (world.n_items,)))(users)
    popularity = np.asarray(prior.sum(axis=0)).ravel().astype(np.float32)
    scores = {"noisy_oracle": np.asarray(logit + config.oracle_noise * noise, np.float32),
              "popularity": np.broadcast_to(popularity, (world.n_users, world.n_items))}
    complete = {s: metrics.evaluate(scores[s], prior, metrics=config.metric_specs) for s in SCORERS}
    return prior, scores, complete, popularity + 1.0


def cells(config: UnbiasednessConfig) -> list[dict]:
    out = [{"scorer": s, "observation": "srs", "param": r} for s in SCORERS for r in config.rates]
    out += [{"scorer": s, "observation": "mnar_popularity", "param": b}
            for s in SCORERS for b in config.mnar_betas]
    return out


def compute(key, config: UnbiasednessConfig, cell: dict) -> dict:
    """Per draw, the user-mean of each metric on O+; plus the complete-data and Thm 2 references."""
    prior, scores, complete, popularity = _shared(key_id(key), config)
    draw_keys = jax.random.split(cell_key(key, cell), config.draws)
    specs = config.metric_specs
    per_draw = {spec: [] for spec in specs}
    for draw_key in draw_keys:
        if cell["observation"] == "srs":
            observed = missing.observe_srs(draw_key, prior, cell["param"])
        else:
            observed = missing.observe_mnar_popularity(draw_key, prior, config.mnar_rate,
                                                       cell["param"], popularity)
        values = metrics.evaluate(scores[cell["scorer"]], observed, metrics=specs)
        for spec in specs:
            per_draw[spec].append(metrics.mean(values[spec]))
    # users observed at all are the same in every draw (the observed size is a function of |P+|)
    n_observed = np.diff(observed.indptr)
    n_prior = np.diff(prior.indptr)
    seen = n_observed > 0
    comp = complete[cell["scorer"]]
    factor = metrics.ndcg_bias_factor(n_observed[seen], n_prior[seen])
    return {"obs": per_draw,
            "comp": {spec: metrics.mean(comp[spec][seen]) for spec in specs},
            "thm2_ndcg": float(np.mean(factor * comp["ndcg"][seen])),
            "users": int(seen.sum()), "mean_observed": float(n_observed[seen].mean()),
            "mean_prior": float(n_prior[seen].mean())}


def _rows(config, results) -> pd.DataFrame:
    rows = []
    for r in results:
        for spec in config.metric_specs:
            draws = np.asarray(r.value["obs"][spec])
            obs, comp = draws.mean(), r.value["comp"][spec]
            se = draws.std(ddof=1) / math.sqrt(len(draws))
            claim = r.value["thm2_ndcg"] if spec == "ndcg" else comp
            rows.append({**r.cell, "metric": spec, "comp": comp, "obs": obs, "se": se,
                         "ratio": obs / comp, "ratio_lo": (obs - 1.96 * se) / comp,
                         "ratio_hi": (obs + 1.96 * se) / comp,
                         "z_vs_comp": _z(obs - comp, se, comp),
                         "thm2": r.value["thm2_ndcg"] if spec == "ndcg" else np.nan,
                         "z_vs_thm2": _z(obs - claim, se, comp) if spec == "ndcg" else np.nan,
                         "mean_observed": r.value["mean_observed"], "mean_prior": r.value["mean_prior"]})
    return pd.DataFrame(rows)


def _z(diff: float, se: float, scale: float) -> float:
    """diff / se, treating both as zero below float64 round-off of the metric's scale (at rate 1
    every draw observes all of P+, so obs = comp up to summation order)."""
    tiny = 1e-12 * abs(scale)
    if se > tiny:
        return diff / se
    return 0.0 if abs(diff) <= tiny else math.copysign(math.inf, diff)


def report(config: UnbiasednessConfig, results) -> Report:
    import matplotlib.pyplot as plt
    import seaborn as sns

    frame = _rows(config, results)
    srs = frame[frame.observation == "srs"].rename(columns={"param": "rate"})
    mnar = frame[frame.observation == "mnar_popularity"].rename(columns={"param": "beta"})
    unbiased = {u.format(k=config.k) for u in UNBIASED}

    summary_rows = []
    for (scorer, metric), group in srs.groupby(["scorer", "metric"], sort=False):
        worst = group.z_vs_comp.abs().max()
        if metric in unbiased:
            claim, verdict = "unbiased (Thm 1)" if metric == "adg" else "unbiased", worst < Z_LIMIT
        elif metric == "ndcg":
            worst_thm2 = group.z_vs_thm2.abs().max()
            claim, verdict = "E[obs] = Thm 2 factor x comp", worst_thm2 < Z_LIMIT
        else:
            claim, verdict = "no guarantee", None
        summary_rows.append({
            "scorer": scorer, "metric": metric, "claim": claim,
            "max |z| obs vs comp": worst,
            "max |z| obs vs Thm 2": group.z_vs_thm2.abs().max() if metric == "ndcg" else np.nan,
            "min ratio": group.ratio.min(), "max ratio": group.ratio.max(),
            "holds": "–" if verdict is None else ("yes" if verdict else "**no**")})
    summary = pd.DataFrame(summary_rows)

    table_srs = srs[["scorer", "metric", "rate", "comp", "obs", "se", "ratio", "ratio_lo", "ratio_hi",
                     "z_vs_comp", "thm2", "z_vs_thm2"]].reset_index(drop=True)
    table_mnar = mnar[["scorer", "metric", "beta", "comp", "obs", "se", "ratio", "ratio_lo",
                       "ratio_hi", "z_vs_comp"]].reset_index(drop=True)

    sns.set_theme(style="whitegrid", context="paper")
    order = list(config.metric_specs)
    fig_srs = _ratio_figure(srs, "rate", order, "observation rate |O+|/|P+|",
                            "Metric on observed O+ / metric on complete P+ (SRS; 95% CI over draws)")
    for ax, scorer in zip(fig_srs.axes, SCORERS):
        thm = srs[(srs.scorer == scorer) & (srs.metric == "ndcg")].sort_values("rate")
        ax.plot(thm.rate, thm.thm2 / thm.comp, "k--", lw=1.2, label="Thm 2 prediction (nDCG)")
    fig_srs.axes[-1].legend(fontsize=7, loc="lower right", ncol=2)
    fig_mnar = _ratio_figure(mnar, "beta", order, "popularity bias strength beta",
                             f"Popularity-biased observation at rate {config.mnar_rate}: obs / comp")
    n = results[0].value["users"] if results else 0
    text = _summary_text(config, summary, mnar, n)
    return Report(tables={"table_summary": summary, "table_srs": table_srs, "table_mnar": table_mnar},
                  figures={"fig_ratio_srs": fig_srs, "fig_ratio_mnar": fig_mnar}, summary=text)


def _ratio_figure(frame, x, order, xlabel, title):
    import matplotlib.pyplot as plt
    import seaborn as sns
    fig, axes = plt.subplots(1, len(SCORERS), figsize=(5.2 * len(SCORERS), 3.8), sharey=True)
    palette = dict(zip(order, sns.color_palette("tab10", len(order))))
    for ax, scorer in zip(np.atleast_1d(axes), SCORERS):
        part = frame[frame.scorer == scorer]
        for metric in order:
            line = part[part.metric == metric].sort_values(x)
            ax.plot(line[x], line.ratio, marker="o", ms=3, color=palette[metric], label=metric)
            ax.fill_between(line[x], line.ratio_lo, line.ratio_hi, color=palette[metric], alpha=0.2)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_title(scorer.replace("_", " "))
        ax.set_xlabel(xlabel)
    np.atleast_1d(axes)[0].set_ylabel("obs / comp")
    np.atleast_1d(axes)[-1].legend(fontsize=7, loc="best", ncol=2)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def _summary_text(config, summary, mnar, n_users) -> str:
    lines = [f"World {config.world.n_users} users x {config.world.n_items} items ({n_users} users "
             f"with observations); {config.draws} SRS draws per rate; a claim holds when "
             f"|z| < {Z_LIMIT} at every rate (z = (mean over draws - claim) / SE).", ""]
    for row in summary.to_dict("records"):
        if row["holds"] != "–":
            z = row["max |z| obs vs Thm 2"] if row["metric"] == "ndcg" else row["max |z| obs vs comp"]
            lines.append(f"- {row['scorer']}, {row['metric']}: {row['claim']} — holds: "
                         f"{row['holds'].strip('*')} (max |z| {z:.2f}; obs/comp from "
                         f"{row['min ratio']:.3f} to {row['max ratio']:.3f})")
    strongest = mnar[(mnar.metric == "adg")].sort_values("beta").groupby("scorer").last()
    for scorer, row in strongest.iterrows():
        lines.append(f"- MNAR (popularity, beta = {row.beta:g}): ADG_obs / ADG_comp = "
                     f"{row.ratio:.3f} for {scorer.replace('_', ' ')} (z = {row.z_vs_comp:.1f}).")
    return "\n".join(lines)


STUDY = Study(
    name="unbiasedness",
    description="Lim et al. Thm 1-2: ADG, Recall and ATOP on observed data are unbiased under SRS, "
                "NDCG is biased by the Thm 2 factor, and MNAR observation breaks ADG",
    presets=PRESETS, cells=cells, compute=compute, report=report, source=__file__,
    report_helpers=(_rows, _z, _ratio_figure, _summary_text))
