"""Benchmark ``bench_opt_adg``: simrec's MF-ADG against LightFM's WARP at equal wall-clock training time.

WARP (Weston, Bengio, Usunier 2010) is the sampler OPT-ADG builds on (Lim §4 cites it for Eq. 5):
both draw negatives until a margin violator, at most max_sampled of them; with
max_sampled = ⌈(|I|-1)/γ⌉ LightFM's draw cap equals OPT-ADG's for γ = 100.

Protocol, per world (`simrec.world.PRESETS`, read at run time; fold 0 of the 70/10/20 per-user
split): every model trains in chunks of one epoch (one sampled pair per training positive) up to
the largest budget of training wall time; simrec in this process (its epoch compiled ahead of
time, the compile time measured separately), LightFM on one thread in its own virtual environment
(a subprocess that trains one epoch per request and hands its embeddings back through an .npz).
Only the training chunks are timed: the validation ADG that picks the checkpoint is computed
between chunks with the clock stopped, for both sides alike (evaluation is charged to neither).
A checkpoint is evaluated when the training time crosses a point of the schedule (a quarter of
every budget: b/4, b/2, 3b/4, b) and just before a chunk that would cross a budget, so every
budget b gets the best-validation checkpoint among those with training time <= b. The test
metrics (ADG, NDCG, Recall@10; train and valid excluded) of that checkpoint are reported per
budget. simrec's compile time is reported in its own column, and the column "ADG, compile
charged" takes the best checkpoint with training time + compile time <= b.

Hyperparameters of each side are chosen the same way (`coordinate_search`): every learning rate
of a log-spaced grid (adagrad for both) at the middle regulariser (simrec: λ; LightFM: its
per-sample L2 alpha on the embeddings), then the other regularisers at the best rate, each point
trained for the tuning budget (the middle budget by default) and scored by the validation ADG of
its best checkpoint within it, each stage stepping up to `--edge-steps` times past its grid's edge
(by the grid's own ratio) while the best value sits on it; the selected point (`simrec.models.select`, with the grid-edge
flags printed) is then trained again from the start to the largest budget and reported at every
budget. The search's validation ADG is printed too. simrec runs with Lim's user-uniform pair sampling (`OptADG`'s
default, sampling="user") and with pairs uniform over the training positives (sampling="positive",
LightFM's visiting rate), each tuned on its own.

    simrec bench opt_adg [--budgets 5 15 45] [--presets lastfm movielens]
                         [--lightfm-python /tmp/lightfm-venv/bin/python]

LightFM 1.17 builds with `pip install 'pip<23.1'` then `pip install --no-use-pep517 lightfm==1.17`
in a separate venv; without it only simrec's rows are printed.
"""
from __future__ import annotations

import functools
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
from simrec.models.positives import positive_sets
from simrec.models.training import train_epoch
from simrec.world import PRESETS, make_world
from simrec_studies._bench_args import (Parser, non_negative_float, non_negative_int, positive_float, positive_int,
                                        usage_errors)
from simrec_studies.common.lim import beyond_edge

EVAL = ("adg", "ndcg", "recall@10")
_LIGHTFM_SCRIPT = """
import sys, time, numpy as np, scipy.sparse as sp
from lightfm import LightFM
data = np.load(sys.argv[1])
train = sp.coo_matrix((np.ones(len(data["rows"]), np.float32), (data["rows"], data["cols"])),
                      shape=tuple(data["shape"]))
model = LightFM(no_components=int(data["dim"]), loss="warp", max_sampled=int(data["max_sampled"]),
                learning_rate=float(data["lr"]), item_alpha=float(data["alpha"]),
                user_alpha=float(data["alpha"]), random_state=0)
for line in sys.stdin:
    if line.strip() != "epoch":
        break
    wall = time.perf_counter()
    model.fit_partial(train, epochs=1, num_threads=1)
    wall = time.perf_counter() - wall
    np.savez(sys.argv[2], user=model.user_embeddings, item=model.item_embeddings,
             item_bias=model.item_biases)
    print(wall, flush=True)
"""


def _fold(preset: str, seed: int = 0):
    """Fold 0 of the 70/10/20 per-user split of the world `preset` (its current `PRESETS` entry)."""
    world = make_world(jax.random.key(seed), PRESETS[preset])
    prior = missing.prior_relevant(jax.random.fold_in(jax.random.key(seed), 1), world)
    observed = missing.observe_srs(jax.random.fold_in(jax.random.key(seed), 2), prior,
                                   missing.DEFAULT_OBSERVATION_RATE)
    return missing.split_per_user(jax.random.fold_in(jax.random.key(seed), 3), observed, n_folds=1)[0]


def _mean_metrics(params: models.MF, relevant, exclude, names) -> dict:
    values = metrics.evaluate(metrics.Factors(params.user, params.item, params.item_bias),
                              relevant, exclude=exclude, metrics=names)
    return {name: metrics.mean(v) for name, v in values.items()}


def schedule(budgets) -> list[float]:
    """Training times at which a checkpoint is evaluated: b/4, b/2, 3b/4, b of every budget b."""
    return sorted({b * q / 4 for b in budgets for q in (1, 2, 3, 4)})


def trace(chunks, split, budgets) -> list[dict]:
    """Run `chunks` (an iterator of (training seconds of the chunk, params getter)) until the
    training time reaches max(budgets), evaluating validation ADG on the schedule (clock stopped).
    Returns the checkpoints that improved the best validation ADG so far, in time order, each
    {"seconds", "valid_adg", test metrics}: the best checkpoint within budget b is the last of
    them with seconds <= b."""
    points, end = schedule(budgets), max(budgets)
    elapsed, best, improved = 0.0, -math.inf, []
    for seconds, params in chunks:
        elapsed += seconds
        due = points and elapsed >= points[0]
        while points and elapsed >= points[0]:
            points.pop(0)
        # the next chunk would cross a budget: this is the last state within it
        crossing = any(elapsed <= b < elapsed + seconds for b in budgets)
        if elapsed <= end and (due or crossing):
            current = params()
            valid = _mean_metrics(current, split.valid, split.train + split.test, ("adg",))["adg"]
            if valid > best:
                best = valid
                improved.append({"seconds": elapsed, "valid_adg": valid, **_mean_metrics(
                    current, split.test, split.train + split.valid, EVAL)})
        if elapsed >= end:
            break
    return improved


def at_budget(improved: list[dict], budget: float, charge: float = 0.0) -> dict | None:
    """The best-validation checkpoint with seconds + charge <= budget (None if there is none)."""
    within = [c for c in improved if c["seconds"] + charge <= budget]
    return within[-1] if within else None


def simrec_chunks(split, *, sampling: str, lr: float, l2: float, dim: int, gamma: float,
                  init_scale: float, batch_size: int, compile_seconds: list):
    """Epochs of simrec's MF-ADG (adagrad at rate lr, λ = l2), compiled ahead of time (the compile
    time is appended to compile_seconds). Yields (training seconds, params getter)."""
    spec = models.OptADG(dim=dim, gamma=gamma, init_scale=init_scale, sampling=sampling)
    optimizer = optax.adagrad(lr)
    sets = positive_sets(split.train)
    init_key, loop_key = jax.random.split(jax.random.key(0))
    params = models.init_mf(init_key, *split.train.shape, dim, init_scale)
    opt_state = optimizer.init(params)
    steps, l2 = jnp.int32(-(-split.train.nnz // batch_size)), jnp.float32(l2)
    start = time.perf_counter()
    epoch = train_epoch.lower(loop_key, spec, params, opt_state, sets, l2, steps,
                              optimizer=optimizer, batch_size=batch_size).compile()
    compile_seconds.append(time.perf_counter() - start)
    for e in range(10**9):
        start = time.perf_counter()
        params, opt_state, _, _ = epoch(jax.random.fold_in(loop_key, e), spec, params, opt_state,
                                        sets, l2, steps)
        jax.block_until_ready(params)
        yield time.perf_counter() - start, (lambda p=params: p)


def lightfm_chunks(split, python: str, *, lr: float, alpha: float, dim: int, gamma: float):
    """Epochs of LightFM WARP (one thread, adagrad at rate lr, per-sample L2 alpha on the
    embeddings) in a subprocess of `python`. Yields (training seconds, params getter)."""
    train = split.train.tocoo()
    with tempfile.TemporaryDirectory() as folder:
        data, out = Path(folder) / "train.npz", Path(folder) / "model.npz"
        np.savez(data, rows=train.row.astype(np.int32), cols=train.col.astype(np.int32),
                 shape=np.array(train.shape), dim=dim,
                 max_sampled=math.ceil((train.shape[1] - 1) / gamma), lr=lr, alpha=alpha)
        process = subprocess.Popen([python, "-c", _LIGHTFM_SCRIPT, str(data), str(out)],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

        def load():
            model = np.load(out)
            return models.MF(user=jnp.asarray(model["user"]), item=jnp.asarray(model["item"]),
                             item_bias=jnp.asarray(model["item_bias"]))
        try:
            while True:
                process.stdin.write("epoch\n")
                process.stdin.flush()
                line = process.stdout.readline()
                if not line:
                    raise RuntimeError(f"LightFM subprocess ({python}) ended early")
                yield float(line), load
        finally:
            process.stdin.close()
            process.wait()


def coordinate_search(value, rates, regularisers, edge_steps: int = 2
                      ) -> list[tuple[float, float, float]]:
    """The search of every side: each learning rate at the middle regulariser, then every other
    regulariser at the best rate (the first among equals); after each stage, up to `edge_steps`
    steps past the edge of that stage's grid while the best value sits on it (the grid's own
    ratio, as `simrec_studies.common.lim.beyond_edge` steps). value(rate, regulariser) -> the validation ADG of
    that point. Returns [(rate, regulariser, value)] in search order."""
    searched = []

    def run(points):
        searched.extend((rate, reg, value(rate, reg)) for rate, reg in points)

    def past_edge(axis: int):                        # `lim.AXES` order: 0 = λ, 1 = rate
        for _ in range(edge_steps):
            rate, reg, _ = max(searched, key=lambda point: point[2])
            more = beyond_edge("mf_adg", [{"lr": r, "l2": g} for r, g, _ in searched],
                               {"lr": rate, "l2": reg}, axis)
            if not more:
                return
            run([(point["lr"], point["l2"]) for point in more])

    middle = sorted(regularisers)[(len(regularisers) - 1) // 2]
    run([(rate, middle) for rate in rates])
    past_edge(1)
    best_rate = max(searched, key=lambda point: point[2])[0]
    run([(best_rate, reg) for reg in regularisers if reg != middle])
    past_edge(0)
    return searched


def _simrec_side(split, args, common, sampling, lr, l2, compile_seconds):
    return simrec_chunks(split, sampling=sampling, lr=lr, l2=l2, init_scale=args.init_scale,
                         batch_size=args.batch_size, compile_seconds=compile_seconds, **common)


def _lightfm_side(split, args, common, lr, alpha, compile_seconds):
    del compile_seconds                              # nothing to compile
    return lightfm_chunks(split, args.lightfm_python, lr=lr, alpha=alpha, **common)


@usage_errors
def main(argv=None) -> int:
    parser = Parser(prog="simrec bench opt_adg", description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["lastfm", "movielens"], choices=sorted(PRESETS),
                        help="worlds of simrec.world.PRESETS")
    parser.add_argument("--budgets", nargs="+", type=positive_float, default=[5.0, 15.0, 45.0],
                        help="training wall-time budgets in seconds")
    parser.add_argument("--tune-budget", type=positive_float, default=None,
                        help="budget at which each side's grid is selected (default: the middle)")
    parser.add_argument("--dim", type=positive_int, default=50)
    parser.add_argument("--gamma", type=positive_float, default=100.0)
    parser.add_argument("--samplings", nargs="+", default=["user", "positive"],
                        choices=["user", "positive"], help="OptADG.sampling of the simrec rows")
    parser.add_argument("--lrs", nargs="+", type=positive_float, default=[0.02, 0.05, 0.1, 0.2, 0.5],
                        help="simrec adagrad learning-rate grid")
    parser.add_argument("--l2s", nargs="+", type=non_negative_float, default=[0.05, 0.2, 0.8],
                        help="simrec λ grid (per-step L2)")
    parser.add_argument("--init-scale", type=non_negative_float, default=0.01, help="simrec's initial SD")
    parser.add_argument("--batch-size", type=positive_int, default=1024)
    parser.add_argument("--lightfm-lrs", nargs="+", type=positive_float,
                        default=[0.005, 0.01, 0.02, 0.05, 0.1],
                        help="LightFM adagrad learning-rate grid")
    parser.add_argument("--lightfm-alphas", nargs="+", type=non_negative_float, default=[1e-8, 1e-6, 1e-4],
                        help="LightFM item_alpha = user_alpha grid (per-sample L2)")
    parser.add_argument("--lightfm-python", default="/tmp/lightfm-venv/bin/python")
    parser.add_argument("--edge-steps", type=non_negative_int, default=2,
                        help="steps each search stage may take past its grid's edge")
    args = parser.parse_args(argv)
    budgets = sorted(args.budgets)
    tune = budgets[len(budgets) // 2] if args.tune_budget is None else args.tune_budget
    has_lightfm = Path(args.lightfm_python).exists()
    common = dict(dim=args.dim, gamma=args.gamma)
    tuning_rows, rows = [], []
    for preset in args.presets:
        split = _fold(preset)
        sides = {f"simrec MF-ADG, sampling={s}": ("λ", args.lrs, args.l2s, functools.partial(
            _simrec_side, split, args, common, s)) for s in args.samplings}
        if has_lightfm:
            sides["LightFM WARP (1 thread)"] = ("alpha", args.lightfm_lrs, args.lightfm_alphas,
                                                functools.partial(_lightfm_side, split, args, common))
        for side, (reg_name, rates, regularisers, make_chunks) in sides.items():
            def value(rate, reg):
                chunks = make_chunks(rate, reg, [])
                chosen = at_budget(trace(chunks, split, [tune]), tune)
                chunks.close()
                valid = chosen["valid_adg"] if chosen else -math.inf
                tuning_rows.append({"world": preset, "model": side, "lr": rate, reg_name: reg,
                                    f"valid ADG at {tune:g} s": valid})
                print(tuning_rows[-1], flush=True)
                return valid
            searched = coordinate_search(value, rates, regularisers, args.edge_steps)
            choice = models.select([{"lr": r, reg_name: g} for r, g, _ in searched],
                                   [v for _, _, v in searched])
            rate, reg = choice.point["lr"], choice.point[reg_name]
            compile_seconds = []
            chunks = make_chunks(rate, reg, compile_seconds)
            improved = trace(chunks, split, budgets)     # the selected point, to the last budget
            chunks.close()
            compile_s = compile_seconds[0] if compile_seconds else 0.0
            for budget in budgets:
                best, charged = at_budget(improved, budget), at_budget(improved, budget, compile_s)
                rows.append({"world": preset, "model": side,
                             "selected": f"lr={rate:g}, {reg_name}={reg:g}",
                             "at grid edge": ", ".join(choice.edges) or "–", "budget s": budget,
                             "train s": best["seconds"] if best else math.nan,
                             "valid ADG": best["valid_adg"] if best else math.nan,
                             **{f"test {m}": best[m] if best else math.nan for m in EVAL},
                             "compile s": compile_s,
                             "test ADG, compile charged": charged["adg"] if charged else math.nan})
    pd.set_option("display.width", 250)
    print(f"\nGrid (validation ADG of the best checkpoint within the tuning budget {tune:g} s):")
    print(pd.DataFrame(tuning_rows).to_string(index=False, float_format="{:.4f}".format))
    print("\nEqual wall-clock training time (best validation checkpoint within each budget; "
          "evaluation time not charged to either side):")
    print(pd.DataFrame(rows).to_string(index=False, float_format="{:.4g}".format))
    if not has_lightfm:
        print(f"\nLightFM not found at {args.lightfm_python}: only simrec rows.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
