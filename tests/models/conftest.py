"""The planted world of the model tests, the models trained on it once, and an independent ADG.

Rank-3 true scores for 200 users x 100 items; each user's 15 best items are relevant, 10 of them
(chosen at random) train, 5 are held out. Everything the tests share comes through the `world`
fixture, including one optimizer object so every train() reuses the same compiled epoch.
"""
from dataclasses import dataclass, field

import jax
import numpy as np
import optax
import pytest
import scipy.sparse as sp

from simrec.models import MFAUC, OptADG, scores, train


def adg(score, excluded, relevant):
    """Mean over users of mean_{h relevant} 1/log2(rank(h) + 2), rank = #non-excluded items scoring higher."""
    score = np.asarray(score, np.float64)
    per_user = []
    for u in range(score.shape[0]):
        candidates = ~excluded[u]
        gains = [1 / np.log2(np.sum(candidates & (score[u] > score[u, h])) + 2)
                 for h in np.flatnonzero(relevant[u])]
        per_user.append(np.mean(gains))
    return float(np.mean(per_user))


@dataclass(frozen=True)
class World:
    train: sp.csr_matrix
    train_dense: np.ndarray
    held_out: np.ndarray
    random_bar: float  # ADG of uniformly random scores: mean + 6 SD over 30 seeds
    learning_rate: float = 0.05
    optimizer: optax.GradientTransformation = None
    adg_spec: OptADG = OptADG(dim=8, gamma=10.0, chunk_size=4, search_width=16)  # chunks 4, 4, 2
    auc_spec: MFAUC = MFAUC(dim=8)
    training: dict = field(default_factory=dict)

    @property
    def n_users(self):
        return self.train.shape[0]

    @property
    def n_items(self):
        return self.train.shape[1]

    def adg_of(self, params):
        return adg(scores(params, np.arange(self.n_users)), self.train_dense, self.held_out)


@pytest.fixture(scope="session")
def world():
    rng = np.random.default_rng(0)
    n_users, n_items = 200, 100
    truth = rng.normal(size=(n_users, 3)) @ rng.normal(size=(n_items, 3)).T
    relevant = rng.permuted(np.argsort(-truth, axis=1)[:, :15], axis=1)
    train_dense = np.zeros((n_users, n_items), bool)
    held_out = np.zeros((n_users, n_items), bool)
    np.put_along_axis(train_dense, relevant[:, 5:], True, 1)
    np.put_along_axis(held_out, relevant[:, :5], True, 1)
    random_adg = [adg(rng.random(train_dense.shape), train_dense, held_out) for _ in range(30)]
    bar = float(np.mean(random_adg) + 6 * np.std(random_adg, ddof=1))
    optimizer = optax.sgd(World.learning_rate)
    return World(sp.csr_matrix(train_dense), train_dense, held_out, bar, optimizer=optimizer,
                 training=dict(epochs=15, batch_size=100, optimizer=optimizer, l2=0.01))


@pytest.fixture(scope="session")
def mf_adg(world):
    return train(jax.random.key(0), world.adg_spec, world.train, **world.training)


@pytest.fixture(scope="session")
def mf_auc(world):
    return train(jax.random.key(0), world.auc_spec, world.train, **world.training)
