"""Study ``counterexample``: nDCG can order two policies opposite to DCG (Jeunen et al., KDD'24
Lemma 5.2, Table 1), reproduced from simrec's own estimators, plus a randomised search that
counts such inversions in small random instances.

Every instance is written as a fully viewed log (ε₀ = 1, every item viewed once per context)
whose labels are the expected qualities E[Q | x, a], so that the registry's "dcg" contributions
(`simrec.ope.contributions`, i.e. `trajectory_dcg`) with a target's exposure give that target's
exact DCG per context, and its nDCG contributions ("ndcg_all", "ndcg") its nDCG under an explicit
ideal: ``"all viewed"`` (iDCG = sum of all qualities, the paper's Table 1) or
``"same discount"`` (iDCG = the qualities sorted in decreasing order under the target's
discount). Aggregates are means over contexts.

Table 1: contexts x₁, x₂, items a₁, a₂, E[Q] = (1, 0) and (1, 2.5), top-1 policies R(x) = a₁ and
R'(x) = a₂ (discount 1 at rank 1, 0 below). Its values follow from the DCG and nDCG formulas
by arithmetic on a constructed instance, so matching the paper's table checks that the estimators
compute those formulas; it is not an empirical finding. Search: for each shape (contexts, items, feed
length K with the log discount 1/log2(i+1) up to K) draw qualities ~ Uniform(0, 1) and two
uniformly random rankings per context, and count instances where DCG(X) and nDCG(X) order the
two policies strictly oppositely. With one context the count must be zero (Lemma 5.1).
"""
from __future__ import annotations

from dataclasses import dataclass

import jax
import numpy as np
import pandas as pd

from simrec import ope, reporting, validate
from simrec.reporting import Claim
from simrec.runner import ConfigError, Report, Study, cell_key

IDEALS = ("all viewed", "same discount")
TABLE1_QUALITY = np.array([[1.0, 0.0], [1.0, 2.5]], np.float32)      # [context, item]
TABLE1_PAPER = {"R": (1.00, 1.00, 1.00, 0.29, 1.00, 0.64), "R'": (0.00, 2.50, 0.00, 0.71, 1.25, 0.36)}
TABLE1_COLUMNS = ("DCG(x1)", "DCG(x2)", "nDCG(x1)", "nDCG(x2)", "DCG(X)", "nDCG(X)")


@dataclass(frozen=True)
class CounterexampleConfig:
    """num_instances: random instances per shape. contexts, items, feed_lengths: the shapes
    searched (every combination with K <= items)."""
    num_instances: int = 5_000                     # random instances per shape
    contexts: tuple[int, ...] = (1, 2, 3, 5)       # numbers of contexts searched
    items: tuple[int, ...] = (2, 3, 5)             # numbers of items searched
    feed_lengths: tuple[int, ...] = (1, 2, 3)      # feed lengths K searched (K <= items)

    def __post_init__(self):
        try:
            validate.integer("num_instances", self.num_instances, low=1)
            for name in ("contexts", "items", "feed_lengths"):
                if not getattr(self, name):
                    raise ValueError(f"{name} must be a non-empty tuple of integers >= 1, got ()")
                for value in getattr(self, name):
                    validate.integer(name, value, low=1)
        except ValueError as err:
            raise ConfigError(str(err)) from None
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


#: the registry's nDCG estimator of each ideal
NDCG_ESTIMATOR = {"all viewed": "ndcg_all", "same discount": "ndcg"}


def _per_context(quality, target_exposure, viewed, discount, ideal: str):
    """DCG and nDCG per context of a fully viewed log with labels = quality (ε₀ = 1): the per-trajectory
    contributions of the registry's "dcg" and nDCG of `ideal` (`ope.contributions`, m = ∞).

    quality, target_exposure: f32[N, n]; viewed: bool[N, n] (False on padding). f64[N] each."""
    data = ope.LoggedData(quality, viewed, np.ones(quality.shape, np.float32), discount)
    parts = ope.contributions(data, {"target": ope.Target(target_exposure)}, np.inf,
                              estimators=["dcg", NDCG_ESTIMATOR[ideal]])
    return parts["dcg", "target"].numerator[0], parts[NDCG_ESTIMATOR[ideal], "target"].numerator[0]


def _table1() -> list[dict]:
    """Records of Table 1: one per (ideal, model, column)."""
    discount = np.array([1.0, 0.0], np.float32)                      # top-1: only rank 1 viewed
    exposures = {"R": np.array([[1.0, 0.0], [1.0, 0.0]], np.float32),
                 "R'": np.array([[0.0, 1.0], [0.0, 1.0]], np.float32)}
    viewed = np.ones(TABLE1_QUALITY.shape, bool)
    out = []
    for ideal in IDEALS:
        for model, exp in exposures.items():
            dcg, ndcg = _per_context(TABLE1_QUALITY, exp, viewed, discount, ideal)
            values = [*dcg, *ndcg, dcg.mean(), ndcg.mean()]
            out += [_record("table1", statistic=column, value=v, ideal=ideal, model=model)
                    for column, v in zip(TABLE1_COLUMNS, values)]
    return out


def _record(part: str, *, statistic: str, value: float, ideal: str = "", model: str = "",
            shape: tuple[int, int, int] = (0, 0, 0), position: tuple[int, int] = (-1, -1)) -> dict:
    """One tidy record (`COLUMNS`); shape = (contexts, items, feed_length) of a search cell,
    position = (context, item) of an example quality."""
    return {"part": part, "contexts": shape[0], "items": shape[1], "feed_length": shape[2],
            "ideal": ideal, "model": model, "statistic": statistic, "context": position[0],
            "item": position[1], "value": float(value)}


def _search(key, config: CounterexampleConfig, contexts: int, items: int, feed_length: int) -> list[dict]:
    """Inversion counts for one shape (and the first inverted instance), as records. Arrays are zero-padded (and masked as not viewed) to the
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

    shape, out = (contexts, items, feed_length), []
    for ideal in IDEALS:
        dcg, ndcg = (v.reshape(2, T, C)[:, :, :contexts].mean(-1) for v in _per_context(
            labels.reshape(-1, n), exposure.reshape(-1, n), viewed.reshape(-1, n), discount, ideal))
        inverted = (dcg[0] - dcg[1]) * (ndcg[0] - ndcg[1]) < 0
        out += [_record("search", statistic="inversions", value=int(inverted.sum()), ideal=ideal, shape=shape),
                _record("search", statistic="instances", value=T, ideal=ideal, shape=shape)]
        if inverted.any() and ideal == "all viewed":                  # the first inversion found
            i = int(np.argmax(inverted))
            quality_i = np.round(quality[i].astype(np.float64), 3)
            out += [_record("example", statistic="quality", value=quality_i[c, a], ideal=ideal, shape=shape,
                            position=(c, a)) for c in range(contexts) for a in range(items)]
            out += [_record("example", statistic=name, value=v[p, i], ideal=ideal, model=model, shape=shape)
                    for name, v in (("DCG(X)", dcg), ("nDCG(X)", ndcg)) for p, model in enumerate("AB")]
    return out


def compute(key, config: CounterexampleConfig, cell: dict, shared=None) -> list[dict]:
    """`key` is the run's root key; each search cell draws from its own `cell_key`, so adding or
    removing shapes never changes the other cells' instances."""
    if cell["part"] == "table1":
        return _table1()
    return _search(cell_key(key, cell), config, cell["contexts"], cell["items"], cell["feed_length"])


def _table1_markdown(t1: pd.DataFrame) -> str:
    """Table 1 as recomputed (two decimals, as printed in the paper), under both ideals."""
    lines = ["| ideal | model | " + " | ".join(TABLE1_COLUMNS) + " |", "|---|---|" + "---|" * len(TABLE1_COLUMNS)]
    for row in t1.itertuples(index=False):
        lines.append(f"| {row[0]} | {row[1]} | " + " | ".join(f"{v:.2f}" for v in row[2:]) + " |")
    return "\n".join(lines)


def _search_verdict(inv_table: pd.DataFrame) -> str:
    """The random search's verdict in one sentence: how often two random rankers of instances
    with several contexts are ordered oppositely by nDCG(X) and DCG(X), per number of contexts."""
    several = inv_table[inv_table.contexts > 1]
    if several.empty:
        return ""
    by_contexts = several.groupby("contexts").apply(
        lambda g: g.inversions.sum() / g.instances.sum(), include_groups=False)
    return (f" Verdict: with several contexts the inversion occurs but is uncommon for random "
            f"instances — {several.rate.min():.1%} to {several.rate.max():.1%} of instance pairs "
            f"per shape and ideal, pooled " + ", ".join(
                f"{rate:.1%} with {n} contexts" for n, rate in by_contexts.items())
            + "; these rates describe uniformly random qualities and rankings, not recommender "
            "data.")


def _figure(inv_table: pd.DataFrame):
    """The inversion rate per shape and ideal."""
    import seaborn as sns
    fig, axes = reporting.figure(width=7, height=3.6)
    ax = axes[0, 0]
    plot = inv_table.assign(shape=inv_table.apply(lambda r: f"{r.contexts}x{r['items']} K={r.feed_length}", axis=1))
    with reporting.theme():
        sns.barplot(data=plot, x="shape", y="rate", hue="ideal", ax=ax)
        ax.set_xlabel("contexts x items, feed length K")
        ax.set_ylabel("P(nDCG order ≠ DCG order)")
        ax.tick_params(axis="x", rotation=70)
        ax.set_title("DCG/nDCG inversions between two random rankers")
        fig.tight_layout()
    return fig


def _claims(t1: pd.DataFrame, inv_table: pd.DataFrame, matches: bool, persists: bool) -> list[Claim]:
    """Table 1 and Lemmas 5.1–5.2 of Jeunen et al. beside what this study finds."""
    row = lambda ideal, model: t1[(t1.ideal == ideal) & (t1.model == model)].iloc[0]  # noqa: E731
    r, r_prime = row("all viewed", "R"), row("all viewed", "R'")
    same, same_prime = row("same discount", "R"), row("same discount", "R'")
    single, several = inv_table[inv_table.contexts == 1], inv_table[inv_table.contexts > 1]
    paper, paper_prime = TABLE1_PAPER["R"], TABLE1_PAPER["R'"]
    claims = [Claim("Jeunen et al. KDD'24, Table 1",
                    "on two contexts, R' has the higher DCG(X) and R the higher nDCG(X) (ideal: every item viewed)",
                    f"DCG(X) {paper[4]:.2f} vs {paper_prime[4]:.2f}; nDCG(X) {paper[5]:.2f} vs {paper_prime[5]:.2f}",
                    f"DCG(X) {r['DCG(X)']:.2f} vs {r_prime['DCG(X)']:.2f}; nDCG(X) {r['nDCG(X)']:.2f} vs "
                    f"{r_prime['nDCG(X)']:.2f}", "reproduced" if matches else "not reproduced",
                    where="table_table1"),
              Claim("Jeunen et al. KDD'24, Table 1",
                    "Lemma 5.2's inversion on Table 1 also holds with the same-discount ideal (iDCG = the best "
                    "quality; the paper normalises by every item's quality)",
                    "", f"nDCG(X) {same['nDCG(X)']:.2f} vs {same_prime['nDCG(X)']:.2f}",
                    "reproduced" if persists else "not reproduced", where="table_table1")]
    if len(single):
        claims.append(Claim("Jeunen et al. KDD'24, Lemma 5.1",
                            "on a single context DCG and nDCG order two policies alike",
                            "never inverted", f"{int(single.inversions.sum())} of {int(single.instances.sum())} "
                            "random instance pairs inverted",
                            "reproduced" if (single.inversions == 0).all() else "not reproduced",
                            where="table_inversions"))
    if len(several):
        pooled = several.inversions.sum() / several.instances.sum()
        claims.append(Claim("Jeunen et al. KDD'24, Lemma 5.2",
                            "averaged over several contexts, DCG and nDCG can order two policies oppositely",
                            "in the general case (shown by one instance)", float(pooled),
                            "reproduced" if several.inversions.sum() > 0 else "not reproduced",
                            se=float(np.sqrt(pooled * (1 - pooled) / several.instances.sum())),
                            where="table_inversions (share of random instance pairs, all shapes with "
                                  "2 or more contexts pooled)"))
    return claims


def report(config: CounterexampleConfig, records: pd.DataFrame) -> Report:
    table1 = records[records.part == "table1"].pivot_table(
        index=["ideal", "model"], columns="statistic", values="value", sort=False)[list(TABLE1_COLUMNS)]
    paper = pd.DataFrame(TABLE1_PAPER.values(), columns=list(TABLE1_COLUMNS),
                         index=pd.MultiIndex.from_product([["paper (Table 1)"], list(TABLE1_PAPER)],
                                                          names=["ideal", "model"]))
    t1 = pd.concat([table1, paper]).reset_index()
    t1.columns.name = None
    rounded = t1[t1.ideal == "all viewed"][list(TABLE1_COLUMNS)].round(2).to_numpy()
    matches = np.allclose(rounded, np.array(list(TABLE1_PAPER.values())))

    counts = records[records.part == "search"].pivot_table(
        index=["contexts", "items", "feed_length", "ideal"], columns="statistic", values="value",
        sort=False).reset_index()
    inv_table = counts.assign(instances=counts.instances.astype(int), inversions=counts.inversions.astype(int))
    inv_table = inv_table[["contexts", "items", "feed_length", "ideal", "instances", "inversions"]]
    inv_table = inv_table.assign(rate=inv_table.inversions / inv_table.instances)
    inv_table = inv_table.assign(rate_se=np.sqrt(inv_table.rate * (1 - inv_table.rate) / inv_table.instances))
    inv_table.columns.name = None
    single = inv_table[inv_table.contexts == 1]
    lemma51 = bool((single.inversions == 0).all()) if len(single) else None

    example = records[records.part == "example"]
    first = example.iloc[:1]
    value = lambda ideal, model, column: float(t1[(t1.ideal == ideal) & (t1.model == model)][column].iloc[0])  # noqa: E731
    r = [value("same discount", "R", c) for c in TABLE1_COLUMNS]
    r_prime = [value("same discount", "R'", c) for c in TABLE1_COLUMNS]
    persists = r_prime[4] > r[4] and r[5] > r_prime[5]
    summary = [
        "Table 1 of Jeunen et al. (KDD'24) recomputed with `simrec.ope.trajectory_dcg` / "
        "`trajectory_ndcg`: " + ("the `all viewed` ideal reproduces the paper's values to two "
                                 "decimals." if matches else "**does not match the paper**.")
        + " The match is definitional, not an empirical finding: the instance is constructed "
        "(two contexts, qualities (1, 0) and (1, 2.5), everything viewed, top-1 policies) so that "
        "its DCG and nDCG follow from the formulas by arithmetic — e.g. nDCG(x₂) of R is "
        "1 / (1 + 2.5) = 0.29. Reproducing it shows that simrec's estimators compute those "
        "formulas; it says nothing about how often the inversion happens in practice.",
        _table1_markdown(t1),
        f"Under the `same discount` ideal (top-1: iDCG = the best quality) nDCG(x₂) becomes "
        f"{r[3]:.2f} / {r_prime[3]:.2f} (R / R') and nDCG(X) {r[5]:.2f} / {r_prime[5]:.2f}; "
        + ("the inversion persists: R' has the higher DCG(X), R the higher nDCG(X)." if persists else
           "**the inversion disappears.**"),
        f"Random search ({config.num_instances} instances per shape): the share of instance pairs "
        "ordered differently by nDCG(X) than by DCG(X) is in `table_inversions`; "
        + ("with one context it is 0, as Lemma 5.1 requires." if lemma51 else
           "one-context shapes were not searched." if lemma51 is None else
           "**one-context shapes show inversions, contradicting Lemma 5.1.**")
        + _search_verdict(inv_table),
    ]
    if len(first):
        shape = first.iloc[0]
        found = example[(example.contexts == shape.contexts) & (example["items"] == shape["items"])
                        & (example.feed_length == shape.feed_length)]
        quality = found[found.statistic == "quality"].pivot(index="context", columns="item", values="value")
        stat = lambda name: found[found.statistic == name].set_index("model").value  # noqa: E731
        dcg, ndcg = stat("DCG(X)"), stat("nDCG(X)")
        summary.append(f"First inversion found ({shape.contexts} contexts x {shape['items']} items, "
                       f"K = {shape.feed_length}, `all viewed`): qualities {quality.to_numpy().tolist()}, "
                       f"DCG(X) {dcg['A']:.3f} vs {dcg['B']:.3f}, nDCG(X) {ndcg['A']:.3f} vs {ndcg['B']:.3f}.")
    summary.append("Caveats: the paper's Lemma 5.2 is an existence statement, shown by one constructed "
                   "instance; the search rates above come from uniformly random qualities and rankings, "
                   "so they bound nothing about recommender data (the `disagreement` study measures the "
                   "inversion between trained models on MovieLens).")
    return Report(tables={"table_table1": t1, "table_inversions": inv_table},
                  figures={"fig_inversions": _figure(inv_table)}, summary="\n\n".join(summary),
                  float_format=".3g", claims=_claims(t1, inv_table, matches, persists))


COLUMNS = {"part": str, "contexts": int, "items": int, "feed_length": int, "ideal": str, "model": str,
           "statistic": str, "context": int, "item": int, "value": float}

STUDY = Study(
    name="counterexample",
    description="nDCG orders policies inconsistently with DCG (Jeunen et al., KDD'24 Lemma 5.2, "
                "Table 1), and how often random instances show it.",
    presets=PRESETS, cells=cells, compute=compute, report=report, columns=COLUMNS,
    expected_seconds={"smoke": 8, "default": 3, "paper": 300},
)
