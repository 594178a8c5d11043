"""Benchmark ``bench_opt_adg``: simrec OPT-ADG against LightFM's WARP on the paper-like worlds.

WARP (Weston, Bengio, Usunier 2010) is the sampler OPT-ADG builds on (Lim §4 cites it for Eq. 5):
both draw negatives until a margin violator, at most max_sampled of them. With
max_sampled = ⌈(|I|-1)/γ⌉ LightFM's draw cap equals OPT-ADG's for γ = 100. Per world the benchmark
trains both for the same number of epochs (one sampled pair per training positive each; LightFM
on one thread, in its own virtual environment through a subprocess, data passed as .npz),
`--repeats` times in alternation (the machine may be shared: the best run of each counts), and
reports training positives per second after compilation (wall and process CPU time) and test
ADG / NDCG / Recall@10 (fold 0 of Lim's 70/10/20 split, train and valid excluded).

The two differ beyond the implementation: OPT-ADG samples u uniformly and i⁺ uniformly in O⁺ᵤ
(Lim Alg. 1 line 2), weights a violator by C(⌊(|I|-1)/n⌋) = 1 - 1/log₂(⌊(|I|-1)/n⌋ + 2) and
draws negatives from I∖{i⁺}; LightFM visits every training positive once per epoch, weights by
log⌊(|I|-1)/n⌋ and skips drawn positives. simrec runs at each `--search-widths` (default:
`OptADG`'s default 8, and 256, faster but with more pairs sharing candidates, see
`simrec.models.opt_adg`). An ablation row trains simrec's OPT-ADG with pairs drawn uniformly
over the training positives (`sample_positives`, LightFM's visiting rate) to separate the
sampling scheme from the implementation. Last, the scaling of simrec's epoch time and step time
with the catalogue size (per-step cost should not grow with |I|).

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
from simrec.models.positives import PositiveSets, positive_sets, sample_pairs
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


def sample_positives(key: jax.Array, sets: PositiveSets, batch_size: int):
    """(u, i⁺) uniform over the training positives, with replacement (LightFM's visiting rate of
    one per positive and epoch; Lim sample u uniformly instead). For the ablation row only.
    Returns users: i32[batch_size], positives: i32[batch_size]."""
    entry = jax.random.randint(key, (batch_size,), 0, sets.indices.shape[0])
    users = jnp.searchsorted(sets.indptr, entry, side="right") - 1
    return users.astype(jnp.int32), sets.indices[entry]


def simrec_run(split, *, epochs: int, dim: int, gamma: float, lr: float, l2: float,
               init_scale: float, batch_size: int, search_width: int,
               sampler=sample_pairs) -> dict:
    """Train `epochs` OPT-ADG epochs (adagrad at rate lr) after compiling; returns the training
    time (wall, process CPU), the step count and the test metrics."""
    spec = models.OptADG(dim=dim, gamma=gamma, init_scale=init_scale, search_width=search_width)
    optimizer = optax.adagrad(lr)
    train = split.train
    sets = positive_sets(train)
    params = models.init_mf(jax.random.key(0), *train.shape, dim, spec.init_scale)
    opt_state = optimizer.init(params)
    steps = jnp.int32(-(-train.nnz // batch_size))
    run = lambda e, p, s: train_epoch(jax.random.key(e), spec, p, s, sets, jnp.float32(l2), steps,
                                      optimizer=optimizer, batch_size=batch_size, sampler=sampler)
    jax.block_until_ready(run(0, params, opt_state))                     # compile
    wall, cpu = time.perf_counter(), time.process_time()
    for epoch in range(epochs):
        params, opt_state, _, _ = run(epoch + 1, params, opt_state)
    jax.block_until_ready(params)
    return {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
            "steps": int(steps), **_evaluate(params, split)}


def lightfm_run(split, python: str, *, epochs: int, dim: int, gamma: float, lr: float,
                alpha: float) -> dict:
    """LightFM WARP (one thread, adagrad at rate lr, per-sample L2 `alpha` on the embeddings) in a
    subprocess of `python`; same outputs as `simrec_run`."""
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
        return {"wall": float(model["wall"]), "cpu": float(model["cpu"]), **_evaluate(params, split)}


def _best(runs: list[dict], positives: int) -> dict:
    """Throughput of the fastest of repeated runs (wall and CPU separately) and its metrics."""
    wall, cpu = min(r["wall"] for r in runs), min(r["cpu"] for r in runs)
    return {"positives/s (wall)": positives / wall, "positives/s (CPU)": positives / cpu,
            **{spec: runs[-1][spec] for spec in EVAL}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="bench_opt_adg", description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["lastfm", "movielens"])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=2, help="alternating timed runs per model")
    parser.add_argument("--dim", type=int, default=50)
    parser.add_argument("--gamma", type=float, default=100.0)
    parser.add_argument("--lr", type=float, default=0.1, help="simrec's adagrad rate")
    parser.add_argument("--l2", type=float, default=0.2, help="simrec's λ (per-step L2)")
    parser.add_argument("--init-scale", type=float, default=0.01, help="simrec's initial SD")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--search-widths", nargs="+", type=int,
                        default=[models.OptADG().search_width, 256],
                        help="OptADG.search_width of the simrec rows (the first is the default "
                             "and also runs the ablation and the scaling)")
    parser.add_argument("--lightfm-lr", type=float, default=0.05, help="LightFM's adagrad rate")
    parser.add_argument("--lightfm-alpha", type=float, default=1e-6,
                        help="LightFM item_alpha = user_alpha (its L2 is per sample, so far smaller)")
    parser.add_argument("--scaling-items", nargs="*", type=int, default=[5000, 10000, 20000])
    parser.add_argument("--lightfm-python", default="/tmp/lightfm-venv/bin/python")
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.repeats < 1:
        parser.error("--epochs and --repeats must be >= 1")
    common = dict(epochs=args.epochs, dim=args.dim, gamma=args.gamma)
    simrec = dict(common, lr=args.lr, l2=args.l2, init_scale=args.init_scale,
                  batch_size=args.batch_size, search_width=args.search_widths[0])
    has_lightfm = Path(args.lightfm_python).exists()
    rows = []
    for preset in args.presets:
        split = _fold(preset)
        names = [f"simrec OPT-ADG (search_width {width})" for width in args.search_widths]
        runs = {name: [] for name in names} | {"LightFM WARP (1 thread)": []}
        for _ in range(args.repeats):
            for name, width in zip(names, args.search_widths):
                runs[name].append(simrec_run(split, **(simrec | {"search_width": width})))
            if has_lightfm:
                runs["LightFM WARP (1 thread)"].append(lightfm_run(
                    split, args.lightfm_python, lr=args.lightfm_lr, alpha=args.lightfm_alpha,
                    **common))
        runs[f"{names[0]}, pairs uniform over positives (ablation)"] = [
            simrec_run(split, sampler=sample_positives, **simrec)]
        positives = args.epochs * split.train.nnz
        rows += [{"world": preset, "model": model, "train positives": split.train.nnz,
                  "epochs": args.epochs, **_best(model_runs, positives)}
                 for model, model_runs in runs.items() if model_runs]
    print(pd.DataFrame(rows).to_string(index=False, float_format="{:.4g}".format))
    if not has_lightfm:
        print(f"\nLightFM not found at {args.lightfm_python}: only simrec rows.")
    scaling = []
    for n_items in args.scaling_items:
        split = _fold("lastfm", n_items)
        result = simrec_run(split, **(simrec | {"epochs": 1}))
        scaling.append({"items": n_items, "draw cap": math.ceil((n_items - 1) / args.gamma),
                        "train positives": split.train.nnz, "steps": result["steps"],
                        "epoch s (wall)": result["wall"],
                        "ms/step (wall)": 1e3 * result["wall"] / result["steps"],
                        "ms/step (CPU)": 1e3 * result["cpu"] / result["steps"]})
    if scaling:
        print("\nOPT-ADG epoch and step time vs catalogue size (lastfm-like world, same offset, "
              f"batch {args.batch_size}, search_width {args.search_widths[0]}):")
        print(pd.DataFrame(scaling).to_string(index=False, float_format="{:.4g}".format))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
