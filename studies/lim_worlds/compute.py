"""The cells of study ``lim_worlds``: one world of the generator (or one real dataset) each, with
its statistics and the test values of Lim's models, each tuned as in ``opt_adg``."""
from __future__ import annotations

import dataclasses

import jax
import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg

from simrec import metrics, missing, models, reporting
from simrec.runner import shared_key
from simrec.world import PAPER_OBSERVED_POSITIVES, PRESETS as WORLD_PRESETS, make_world
from simrec_studies.common import lim

#: the statistics of a dataset's observed positives O⁺ (records with method `DATA`)
STATISTICS = ("positives per user", "user activity CV", "popularity slope", "effective rank",
              "top singular share", "offset")
DATA = "data"
#: the models every other is compared with, user by user (records ``vs_NAME`` and ``vs_NAME_se``)
BASELINES = ("svd", "popularity")
#: the share of ||O⁺||²_F the `effective rank` leading singular values hold
ENERGY = 0.5
#: most singular values computed for the effective rank (a larger one is reported as this + 1)
MAX_RANK = 200


def cells(config) -> list[dict]:
    """One cell per world (base preset × taste dimension × popularity exponent × affinity scale),
    then one per real dataset present (generator coordinates 0)."""
    worlds = [{"dataset": base, "dim": dim, "popularity_exponent": exponent, "affinity_scale": scale}
              for base in config.bases for dim in config.dims
              for exponent in config.popularity_exponents for scale in config.affinity_scales]
    real = lim.datasets((), config.real, config.data)
    return worlds + [{"dataset": name, "dim": 0, "popularity_exponent": 0.0, "affinity_scale": 0.0} for name in real]


def world_config(cell: dict):
    """The cell's `simrec.world.WorldConfig`: its base preset with the cell's taste dimension,
    popularity exponent and affinity scale, the offset still the preset's (see `calibrated`)."""
    return dataclasses.replace(WORLD_PRESETS[cell["dataset"]], dim=cell["dim"],
                               popularity_exponent=cell["popularity_exponent"],
                               affinity_scale=cell["affinity_scale"])


def calibrated(key: jax.Array, cell: dict, rate: float):
    """`world_config` with the offset that gives Lim's |O⁺| of the base dataset
    (`simrec.world.PAPER_OBSERVED_POSITIVES`) at SRS rate `rate`, on the full-size world drawn
    with the key `lim.world_dataset` uses (expectation over every 4th user, target scaled); a
    base without a Lim dataset (``tiny``) keeps its preset's offset."""
    config = world_config(cell)
    name = cell["dataset"]
    if name not in PAPER_OBSERVED_POSITIVES:
        return config
    world = make_world(shared_key(key, f"world:{name}"), config)
    users = np.arange(0, config.n_users, 4)
    target = PAPER_OBSERVED_POSITIVES[name] * users.size / config.n_users
    return dataclasses.replace(config, offset=missing.calibrate_offset(world, target, rate, users=users))


def statistics(observed: sp.csr_matrix) -> dict[str, float]:
    """`STATISTICS` of bool CSR O⁺ [U, I] (but the offset): mean and coefficient of variation of
    the positives per user; the log-log slope of the items' positive counts against their rank
    (items with one or more); the effective rank, the fewest leading singular values whose squares
    hold `ENERGY` of ||O⁺||²_F = nnz (at most `MAX_RANK` computed; ``MAX_RANK + 1`` when they do
    not reach it); and the share of ||O⁺||²_F held by the first singular value."""
    per_user = np.diff(observed.indptr)
    counts = np.sort(np.bincount(observed.indices, minlength=observed.shape[1]))[::-1]
    counts = counts[counts > 0]
    k = min(MAX_RANK, min(observed.shape) - 1)
    squares = np.sort(scipy.sparse.linalg.svds(observed.astype(np.float64), k=k, return_singular_vectors=False,
                                               rng=0))[::-1] ** 2
    held = np.cumsum(squares) / observed.nnz
    return {"positives per user": float(per_user.mean()),
            "user activity CV": float(per_user.std() / per_user.mean()),
            "popularity slope": reporting.loglog_fit(np.arange(1, counts.size + 1), counts).exponent,
            "effective rank": float(np.searchsorted(held, ENERGY) + 1) if held[-1] >= ENERGY else float(k + 1),
            "top singular share": float(held[0])}


def _dataset(key: jax.Array, config, cell: dict) -> tuple[lim.Dataset, float]:
    """The cell's dataset and its world's offset (NaN for real data)."""
    if cell["dataset"] in lim.REAL_DATASETS:
        return lim.make_dataset(key, config.data, cell["dataset"]), float("nan")
    world = calibrated(key, cell, config.data.observation_rate)
    return lim.world_dataset(key, config.data, cell["dataset"], world), world.offset


def _edges(method: str, searched) -> str:
    """The searched axes (`lim.AXES`) whose selected value is the smallest or largest searched."""
    if method not in lim.AXES:
        return ""
    points = [{axis: float(fitted.setting[axis]) for axis in lim.AXES[method]} for fitted, _ in searched]
    values = [next(r["value"] for r in rows if r["metric"] == lim.STOP_METRIC) for _, rows in searched]
    return ", ".join(models.select(points, values).edges)


def compute(key: jax.Array, config, cell: dict, shared=None) -> list[dict]:
    """The cell's statistics (`statistics`, method `DATA`), then per method of ``config.methods``
    (the oracle in simulation only): the setting `lim.search` selects on fold 0's validation split
    and, per metric of `lim.METRICS`, its mean test value (held-out protocol: train and validation
    items excluded) and its mean per-user difference from each of the `BASELINES` (the selected
    SVD's and popularity's values), with the standard error of that mean over the test users."""
    ds, offset = _dataset(key, config, cell)
    coordinates = {k: cell[k] for k in ("dataset", "dim", "popularity_exponent", "affinity_scale")}
    blank = {"l2": 0.0, "lr": 0.0, "rank": 0, "at_edge": "",
             **{f"vs_{b}{part}": float("nan") for b in BASELINES for part in ("", "_se")}}
    split = ds.splits[0]
    rows = [{**coordinates, **blank, "method": DATA, "metric": name, "value": value}
            for name, value in {**statistics(ds.observed), "offset": offset}.items()]
    values, chosen = {}, {}
    for method in config.methods:
        if method == "oracle" and ds.world is None:
            continue
        searched, best = lim.search(key, ds, config.training, {"dataset": cell["dataset"], "method": method})
        fitted = searched[best][0]
        values[method] = metrics.evaluate(fitted.score_block, split.test, exclude=split.train + split.valid,
                                          metrics=lim.METRICS)
        chosen[method] = {"l2": float(fitted.setting["l2"]), "lr": float(fitted.setting["lr"]),
                          "rank": int(fitted.setting["rank"]), "at_edge": _edges(method, searched)}
    for method, per_user in values.items():
        for spec in lim.METRICS:
            paired = {}
            for baseline in BASELINES:
                if method != baseline:
                    paired[f"vs_{baseline}"], paired[f"vs_{baseline}_se"] = \
                        metrics.mean_and_se(per_user[spec] - values[baseline][spec])
            rows.append({**coordinates, **blank, **chosen[method], **paired, "method": method, "metric": spec,
                         "value": metrics.mean(per_user[spec])})
    return rows
