"""The disagreement study's computation: the data sets (the real data's split; the simulated
world's split, truth and controlled-count held-out sets), the EASE and KUNN grids, and every
model's DCG@k and nDCG@k on every target (the package docstring states the design)."""
from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import jax
import numpy as np
import scipy.sparse as sp

from simrec import data, metrics, missing, models
from simrec.datafiles import data_file
from simrec.runner import cell_key, shared_key
from simrec.world import make_world

if TYPE_CHECKING:
    from simrec_studies.disagreement import DisagreementConfig

REAL_DATA = "ml-latest-small"


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
