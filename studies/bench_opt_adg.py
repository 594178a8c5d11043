"""Benchmark ``bench_opt_adg``: simrec OPT-ADG against LightFM's WARP on the paper-like worlds.

WARP (Weston, Bengio, Usunier 2010) is the sampler OPT-ADG builds on (Lim §4 cites it for Eq. 5):
both draw negatives until a margin violator, at most max_sampled of them. With
max_sampled = ⌈(|I|-1)/γ⌉ LightFM's draw cap equals OPT-ADG's for γ = 100. Per world the benchmark
trains both for the same number of epochs (one pass over the training positives each; LightFM on
one thread, in its own virtual environment through a subprocess, data passed as .npz), reports
training positives per second after compilation (wall and process CPU time) and test
ADG / NDCG / Recall@10 (fold 0 of Lim's 70/10/20 split, train and valid excluded), then the
scaling of simrec's epoch time with the catalogue size.

    python -m studies.bench_opt_adg [--epochs 5] [--lightfm-python /tmp/lightfm-venv/bin/python]

LightFM 1.17 builds with `pip install 'pip<23.1'` then `pip install --no-use-pep517 lightfm==1.17`
in a separate venv; without it only simrec's rows are printed.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import subprocess
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pandas as pd

from simrec import metrics, missing, models
from simrec.models.data import positive_sets
from simrec.models.training import train_epoch
from simrec.world import PRESETS, make_world

EVAL = ("adg", "ndcg", "recall@10")
_LIGHTFM_SCRIPT = """
import sys, time, numpy as np, scipy.sparse as sp
from lightfm import LightFM
data = np.load(sys.argv[1])
shape = tuple(data["shape"])
train = sp.coo_matrix((np.ones(len(data["rows"]), np.float32), (data["rows"], data["cols"])), shape=shape)
model = LightFM(no_components=int(data["dim"]), loss="warp", max_sampled=int(data["max_sampled"]),
                learning_rate=float(data["lr"]), item_alpha=float(data["alpha"]),
                user_alpha=float(data["alpha"]), random_state=0)
epochs = int(data["epochs"])
wall, cpu = time.perf_counter(), time.process_time()
model.fit_partial(train, epochs=epochs, num_threads=1)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
np.savez(sys.argv[2], user=model.user_embeddings, item=model.item_embeddings,
         item_bias=model.item_biases, wall=wall, cpu=cpu)
"""


def _fold(preset: str, n_items: int | None = None, seed: int = 0):
    config = PRESETS[preset] if n_items is None else dataclasses.replace(PRESETS[preset], n_items=n_items)
    world = make_world(jax.random.key(seed), config)
    prior = missing.prior_relevant(jax.random.fold_in(jax.random.key(seed), 1), world)
    observed = missing.observe_srs(jax.random.fold_in(jax.random.key(seed), 2), prior,
                                   missing.DEFAULT_OBSERVATION_RATE)
    return missing.split_per_user(jax.random.fold_in(jax.random.key(seed), 3), observed, n_folds=1)[0]


def _evaluate(params: models.MF, split) -> dict:
    values = metrics.evaluate(lambda users: models.scores(params, users), split.test,
                              exclude=split.train + split.valid, metrics=EVAL)
    return {spec: metrics.mean(v) for spec, v in values.items()}


def simrec_run(split, *, epochs: int, dim: int, gamma: float, lr: float, l2: float,
               batch_size: int) -> dict:
    """Time `epochs` OPT-ADG epochs after one compiling epoch; returns throughput and test metrics."""
    spec = models.OptADG(dim=dim, gamma=gamma)
    optimizer = optax.adagrad(lr)
    train = split.train
    sets = positive_sets(train)
    params = models.init_mf(jax.random.key(0), *train.shape, dim, spec.init_scale)
    opt_state = optimizer.init(params)
    steps = jnp.int32(-(-train.nnz // batch_size))
    run = lambda e, p, s: train_epoch(jax.random.key(e), spec, p, s, sets, jnp.float32(l2), steps,
                                      optimizer=optimizer, batch_size=batch_size)
    jax.block_until_ready(run(0, params, opt_state))                     # compile
    wall, cpu = time.perf_counter(), time.process_time()
    for epoch in range(epochs):
        params, opt_state, _, _ = run(epoch + 1, params, opt_state)
    jax.block_until_ready(params)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    positives = epochs * train.nnz
    return {"positives/s (wall)": positives / wall, "positives/s (CPU)": positives / cpu,
            "epoch s (wall)": wall / epochs, **_evaluate(params, split)}


def lightfm_run(split, python: str, *, epochs: int, dim: int, gamma: float, lr: float,
                alpha: float) -> dict:
    """LightFM WARP (one thread, adagrad at rate lr, per-sample L2 `alpha` on the embeddings) in a
    subprocess of `python`; same metrics as `simrec_run`."""
    train = split.train.tocoo()
    n_items = train.shape[1]
    with tempfile.TemporaryDirectory() as folder:
        data, out = Path(folder) / "train.npz", Path(folder) / "model.npz"
        np.savez(data, rows=train.row.astype(np.int32), cols=train.col.astype(np.int32),
                 shape=np.array(train.shape), dim=dim, max_sampled=math.ceil((n_items - 1) / gamma),
                 lr=lr, alpha=alpha, epochs=epochs)
        subprocess.run([python, "-c", _LIGHTFM_SCRIPT, str(data), str(out)], check=True)
        model = np.load(out)
        params = models.MF(user=jnp.asarray(model["user"]), item=jnp.asarray(model["item"]),
                           item_bias=jnp.asarray(model["item_bias"]))
        positives = epochs * train.nnz
        return {"positives/s (wall)": positives / float(model["wall"]),
                "positives/s (CPU)": positives / float(model["cpu"]),
                "epoch s (wall)": float(model["wall"]) / epochs, **_evaluate(params, split)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="bench_opt_adg", description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["lastfm", "movielens"])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--dim", type=int, default=50)
    parser.add_argument("--gamma", type=float, default=100.0)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--l2", type=float, default=0.01, help="simrec's λ (per-step L2)")
    parser.add_argument("--lightfm-alpha", type=float, default=1e-6,
                        help="LightFM item_alpha = user_alpha (its L2 is per sample, so far smaller)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--scaling-items", nargs="*", type=int, default=[5000, 10000, 20000])
    parser.add_argument("--lightfm-python", default="/tmp/lightfm-venv/bin/python")
    args = parser.parse_args(argv)
    if args.epochs < 1:
        parser.error("--epochs must be >= 1")
    common = dict(epochs=args.epochs, dim=args.dim, gamma=args.gamma, lr=args.lr)
    has_lightfm = Path(args.lightfm_python).exists()
    rows = []
    for preset in args.presets:
        split = _fold(preset)
        rows.append({"world": preset, "model": "simrec OPT-ADG", "train positives": split.train.nnz,
                     **simrec_run(split, batch_size=args.batch_size, l2=args.l2, **common)})
        if has_lightfm:
            rows.append({"world": preset, "model": "LightFM WARP (1 thread)",
                         "train positives": split.train.nnz,
                         **lightfm_run(split, args.lightfm_python, alpha=args.lightfm_alpha,
                                       **common)})
    print(pd.DataFrame(rows).to_string(index=False, float_format="{:.4g}".format))
    if not has_lightfm:
        print(f"\nLightFM not found at {args.lightfm_python}: only simrec rows.")
    scaling = []
    for n_items in args.scaling_items:
        split = _fold("lastfm", n_items)
        result = simrec_run(split, batch_size=args.batch_size, l2=args.l2, **(common | {"epochs": 1}))
        scaling.append({"items": n_items, "train positives": split.train.nnz,
                        "epoch s (wall)": result["epoch s (wall)"],
                        "positives/s (wall)": result["positives/s (wall)"]})
    if scaling:
        print("\nOPT-ADG epoch time vs catalogue size (lastfm-like world, same offset):")
        print(pd.DataFrame(scaling).to_string(index=False, float_format="{:.4g}".format))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
