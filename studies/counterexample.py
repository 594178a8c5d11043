"""Study ``counterexample``: nDCG can order two policies opposite to DCG (Jeunen et al., KDD'24
Lemma 5.2, Table 1), reproduced from simrec's own estimators, plus a randomised search that
counts such inversions in small random instances.

Every instance is written as a fully viewed log (ε₀ = 1, every item viewed once per context)
whose labels are the expected qualities E[Q | x, a], so that `simrec.ope.trajectory_dcg` with a
target's exposure gives that target's exact DCG per context, and `trajectory_ndcg` its nDCG
under an explicit ideal: ``"all viewed"`` (iDCG = sum of all qualities, the paper's Table 1) or
``"same discount"`` (iDCG = the qualities sorted in decreasing order under the target's
discount). Aggregates are means over contexts.

Table 1: contexts x₁, x₂, items a₁, a₂, E[Q] = (1, 0) and (1, 2.5), top-1 policies R(x) = a₁ and
R'(x) = a₂ (discount 1 at rank 1, 0 below). Search: for each shape (contexts, items, feed
length K with the log discount 1/log2(i+1) up to K) draw qualities ~ Uniform(0, 1) and two
uniformly random rankings per context, and count instances where DCG(X) and nDCG(X) order the
two policies strictly oppositely. With one context the count must be zero (Lemma 5.1).
"""
from __future__ import annotations

from dataclasses import dataclass

import jax
import numpy as np
import pandas as pd

from simrec import ope
from simrec.runner import CellResult, ConfigError, Report, Study, cell_key

IDEALS = ("all viewed", "same discount")
TABLE1_QUALITY = np.array([[1.0, 0.0], [1.0, 2.5]], np.float32)      # [context, item]
TABLE1_PAPER = {"R": (1.00, 1.00, 1.00, 0.29, 1.00, 0.64), "R'": (0.00, 2.50, 0.00, 0.71, 1.25, 0.36)}
TABLE1_COLUMNS = ("DCG(x1)", "DCG(x2)", "nDCG(x1)", "nDCG(x2)", "DCG(X)", "nDCG(X)")


@dataclass(frozen=True)
class CounterexampleConfig:
    """num_instances: random instances per shape. contexts, items, feed_lengths: the shapes
    searched (every combination with K <= items)."""
    num_instances: int = 5_000
    contexts: tuple[int, ...] = (1, 2, 3, 5)
    items: tuple[int, ...] = (2, 3, 5)
    feed_lengths: tuple[int, ...] = (1, 2, 3)

    def __post_init__(self):
        if isinstance(self.num_instances, bool) or not isinstance(self.num_instances, int) \
                or self.num_instances < 1:
            raise ConfigError(f"num_instances must be an integer >= 1, got {self.num_instances!r}")
        for name in ("contexts", "items", "feed_lengths"):
            values = getattr(self, name)
            if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
                raise ConfigError(f"{name} must be a non-empty tuple of integers >= 1, got {values!r}")
        if not any(k <= n for k in self.feed_lengths for n in self.items):
            raise ConfigError("no shape has feed_length <= items; add a smaller feed length")


PRESETS = {
    "smoke": CounterexampleConfig(num_instances=500, contexts=(1, 2), items=(2, 3), feed_lengths=(1, 2)),
    "default": CounterexampleConfig(),
    "paper": CounterexampleConfig(num_instances=200_000, contexts=(1, 2, 3, 5, 10), items=(2, 3, 5, 10),
                                  feed_lengths=(1, 2, 3, 5)),
}


def cells(config: CounterexampleConfig) -> list[dict]:
    out = [{"part": "table1"}]
    out += [{"part": "search", "contexts": c, "items": n, "feed_length": k}
            for c in config.contexts for n in config.items for k in config.feed_lengths if k <= n]
    return out


def _per_context(quality, target_exposure, viewed, discount, ideal: str):
    """DCG and nDCG per context of a fully viewed log with labels = quality (ε₀ = 1).

    quality, target_exposure: f32[N, n]; viewed: bool[N, n] (False on padding). f64[N] each."""
    ones = np.ones(quality.shape, np.float32)
    dcg = ope.trajectory_dcg(quality, ones, target_exposure, viewed)
    ndcg = ope.trajectory_ndcg(quality, ones, target_exposure, viewed, discount, ideal=ideal)
    return np.asarray(dcg, np.float64), np.asarray(ndcg, np.float64)


def _table1() -> dict:
    discount = np.array([1.0, 0.0], np.float32)                      # top-1: only rank 1 viewed
    exposures = {"R": np.array([[1.0, 0.0], [1.0, 0.0]], np.float32),
                 "R'": np.array([[0.0, 1.0], [0.0, 1.0]], np.float32)}
    viewed = np.ones(TABLE1_QUALITY.shape, bool)
    out = {}
    for ideal in IDEALS:
        for model, exp in exposures.items():
            dcg, ndcg = _per_context(TABLE1_QUALITY, exp, viewed, discount, ideal)
            out[f"{ideal}|{model}"] = [*dcg, *ndcg, dcg.mean(), ndcg.mean()]
    return out


def _search(key, config: CounterexampleConfig, contexts: int, items: int, feed_length: int) -> dict:
    """Inversion counts for one shape. Arrays are zero-padded (and masked as not viewed) to the
    config's largest shape, so every shape reuses one compilation."""
    T, C, n = config.num_instances, max(config.contexts), max(config.items)
    k_quality, k_rank = jax.random.split(key)
    quality = np.asarray(jax.random.uniform(k_quality, (T, C, n)))[:, :contexts, :items]
    survival = 1.0 / np.log2(np.arange(1, n + 1) + 1.0)
    discount = np.where(np.arange(n) < feed_length, survival, 0.0).astype(np.float32)
    # two policies = two uniformly random rankings per (instance, context); exposure = S(rank)
    ranks = np.asarray(jax.random.uniform(k_rank, (2, T, C, n)))[..., :contexts, :items].argsort(-1).argsort(-1)
    labels = np.zeros((2, T, C, n), np.float32)
    exposure, viewed = labels.copy(), np.zeros(labels.shape, bool)
    labels[:, :, :contexts, :items] = quality
    exposure[:, :, :contexts, :items] = discount[ranks]
    viewed[:, :, :contexts, :items] = True

    result, first = {}, {}
    for ideal in IDEALS:
        dcg, ndcg = (v.reshape(2, T, C)[:, :, :contexts].mean(-1) for v in _per_context(
            labels.reshape(-1, n), exposure.reshape(-1, n), viewed.reshape(-1, n), discount, ideal))
        inverted = (dcg[0] - dcg[1]) * (ndcg[0] - ndcg[1]) < 0
        result[ideal] = {"inversions": int(inverted.sum()), "instances": T}
        if inverted.any() and ideal == "all viewed":
            i = int(np.argmax(inverted))
            first = {"quality": np.round(quality[i].astype(np.float64), 3).tolist(), "dcg": dcg[:, i].tolist(),
                     "ndcg": ndcg[:, i].tolist()}
    if first:
        result["example"] = first
    return result


def compute(key, config: CounterexampleConfig, cell: dict) -> dict:
    """`key` is the run's root key; each search cell draws from its own `cell_key`, so adding or
    removing shapes never changes the other cells' instances."""
    if cell["part"] == "table1":
        return _table1()
    return _search(cell_key(key, cell), config, cell["contexts"], cell["items"], cell["feed_length"])


def _table1_markdown(table1: dict) -> str:
    """Table 1 as recomputed (two decimals, as printed in the paper), under both ideals."""
    lines = ["| ideal | model | " + " | ".join(TABLE1_COLUMNS) + " |", "|---|---|" + "---|" * len(TABLE1_COLUMNS)]
    for ideal in (*IDEALS, "paper (Table 1)"):
        for model in ("R", "R'"):
            values = TABLE1_PAPER[model] if ideal.startswith("paper") else table1[f"{ideal}|{model}"]
            lines.append(f"| {ideal} | {model} | " + " | ".join(f"{v:.2f}" for v in values) + " |")
    return "\n".join(lines)


def report(config: CounterexampleConfig, results: list[CellResult]) -> Report:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    table1 = next(r.value for r in results if r.cell["part"] == "table1")
    rows = []
    for ideal in IDEALS:
        for model in ("R", "R'"):
            rows.append({"ideal": ideal, "model": model, **dict(zip(TABLE1_COLUMNS, table1[f"{ideal}|{model}"]))})
    for model, values in TABLE1_PAPER.items():
        rows.append({"ideal": "paper (Table 1)", "model": model, **dict(zip(TABLE1_COLUMNS, values))})
    t1 = pd.DataFrame(rows)
    rounded = t1[t1.ideal == "all viewed"][list(TABLE1_COLUMNS)].round(2).to_numpy()
    matches = np.allclose(rounded, np.array(list(TABLE1_PAPER.values())))

    search = []
    for r in results:
        if r.cell["part"] != "search":
            continue
        for ideal in IDEALS:
            n, inv = r.value[ideal]["instances"], r.value[ideal]["inversions"]
            rate = inv / n
            search.append({"contexts": r.cell["contexts"], "items": r.cell["items"],
                           "feed_length": r.cell["feed_length"], "ideal": ideal, "instances": n,
                           "inversions": inv, "rate": rate, "rate_se": float(np.sqrt(rate * (1 - rate) / n))})
    inv_table = pd.DataFrame(search)
    single = inv_table[inv_table.contexts == 1]
    lemma51 = bool((single.inversions == 0).all()) if len(single) else None

    fig, ax = plt.subplots(figsize=(7, 3.6))
    plot = inv_table.assign(shape=inv_table.apply(lambda r: f"{r.contexts}x{r['items']} K={r.feed_length}", axis=1))
    sns.barplot(data=plot, x="shape", y="rate", hue="ideal", ax=ax)
    ax.set_xlabel("contexts x items, feed length K")
    ax.set_ylabel("P(nDCG order ≠ DCG order)")
    ax.tick_params(axis="x", rotation=70)
    ax.set_title("DCG/nDCG inversions between two random rankers")
    fig.tight_layout()

    example = next((r for r in results if r.cell["part"] == "search" and "example" in r.value), None)
    r, r_prime = table1["same discount|R"], table1["same discount|R'"]
    persists = r_prime[4] > r[4] and r[5] > r_prime[5]
    summary = [
        "Table 1 of Jeunen et al. (KDD'24) recomputed with `simrec.ope.trajectory_dcg` / "
        "`trajectory_ndcg`: " + ("the `all viewed` ideal reproduces the paper's values to two "
                                 "decimals." if matches else "**does not match the paper**."),
        _table1_markdown(table1),
        f"Under the `same discount` ideal (top-1: iDCG = the best quality) nDCG(x₂) becomes "
        f"{r[3]:.2f} / {r_prime[3]:.2f} (R / R') and nDCG(X) {r[5]:.2f} / {r_prime[5]:.2f}; "
        + ("the inversion persists: R' has the higher DCG(X), R the higher nDCG(X)." if persists else
           "**the inversion disappears.**"),
        f"Random search ({config.num_instances} instances per shape): the share of instance pairs "
        "ordered differently by nDCG(X) than by DCG(X) is in `table_inversions`; "
        + ("with one context it is 0, as Lemma 5.1 requires." if lemma51 else
           "one-context shapes were not searched." if lemma51 is None else
           "**one-context shapes show inversions, contradicting Lemma 5.1.**"),
    ]
    if example is not None:
        ex = example.value["example"]
        summary.append(f"First inversion found ({example.cell['contexts']} contexts x "
                       f"{example.cell['items']} items, K = {example.cell['feed_length']}, `all viewed`): "
                       f"qualities {ex['quality']}, DCG(X) {ex['dcg'][0]:.3f} vs {ex['dcg'][1]:.3f}, "
                       f"nDCG(X) {ex['ndcg'][0]:.3f} vs {ex['ndcg'][1]:.3f}.")
    return Report(tables={"table_table1": t1, "table_inversions": inv_table},
                  figures={"fig_inversions": fig}, summary="\n\n".join(summary), float_format=".3g")


STUDY = Study(
    name="counterexample",
    description="nDCG orders policies inconsistently with DCG (Jeunen et al., KDD'24 Lemma 5.2, "
                "Table 1), and how often random instances show it.",
    presets=PRESETS, cells=cells, compute=compute, report=report, source=__file__,
    report_helpers=(_table1_markdown,),
)
