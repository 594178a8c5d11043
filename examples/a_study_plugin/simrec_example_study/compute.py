"""The compute side of study ``observed_metrics``: one world, its prior-relevant sets and a
ranker's scores (``setup``, built once per run), and one observed set per cell (``compute``)."""
from typing import NamedTuple

import jax
import numpy as np
import scipy.sparse as sp

from simrec import metrics, missing, world
from simrec.runner import cell_key, shared_key

METRICS = ("adg", "ndcg")


class Shared(NamedTuple):
    prior: sp.csr_matrix             # P+: bool [U, I], every item a user would find relevant
    scores: np.ndarray               # f32[U, I], a noisy oracle ranker's scores
    complete: dict                   # {metric: f64[U]} on P+


def setup(key, config) -> Shared:
    """The world, P+ and the scores: shared by every cell, drawn from named shared keys."""
    w = world.make_world(shared_key(key, "world"), config.world)
    prior = missing.prior_relevant(shared_key(key, "prior"), w)
    noise = jax.random.normal(shared_key(key, "noise"), (w.n_users, w.n_items)) * config.noise
    scores = np.asarray(world.quality_logit(w, np.arange(w.n_users)) + noise)
    return Shared(prior, scores, metrics.evaluate(scores, prior, metrics=METRICS))


def cells(config) -> list[dict]:
    """One cell per (observation rate, draw): independent, cached one by one."""
    return [{"rate": rate, "draw": draw} for rate in config.rates for draw in range(config.draws)]


def compute(key, config, cell, shared: Shared) -> list[dict]:
    """Draw O+ as a simple random sample of P+ at the cell's rate; each metric's user mean on O+
    and on P+ (users with relevant items only)."""
    observed = missing.observe_srs(cell_key(key, cell), shared.prior, cell["rate"])
    per_user = metrics.evaluate(shared.scores, observed, metrics=METRICS)
    return [{"rate": cell["rate"], "draw": cell["draw"], "metric": name,
             "observed": metrics.mean(per_user[name]), "complete": metrics.mean(shared.complete[name])}
            for name in METRICS]
