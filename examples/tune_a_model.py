"""Tuning a model: fit every point of a grid, score it on validation data, select the best, and
flag a choice at the edge of its grid (`simrec.models.tune`), inside a store of fitted models
(`simrec.models.store`), from which a later identical fit (`simrec.models.fitted`) is read back.

MF-ADG (Lim et al.'s OPT-ADG, RecSys'15 Alg. 1) is tuned over its regulariser λ with early
stopping on validation ADG; EASE, which has no training curve, is scored by a value function.
Run: python examples/tune_a_model.py   (about 20 s on a 2-core CPU)
"""
import tempfile
import time

import jax
import numpy as np

from simrec import metrics, missing, models, world

key = jax.random.key(0)
w = world.make_world(key, world.WorldConfig(n_users=500, n_items=200))
prior = missing.prior_relevant(jax.random.fold_in(key, 1), w)                # every relevant item P+
observed = missing.observe_srs(jax.random.fold_in(key, 2), prior, 0.5)       # what was logged, O+
split = missing.split_per_user(jax.random.fold_in(key, 3), observed, (0.7, 0.1, 0.2), n_folds=1)[0]
print(f"{w.n_users} users x {w.n_items} items; train / valid / test positives: "
      f"{split.train.nnz} / {split.valid.nnz} / {split.test.nnz}")


def test_adg(model) -> float:
    """Mean test ADG over users, training items excluded (validation items count as unknown)."""
    return metrics.mean(metrics.adg(lambda users: models.score(model, users), split.test,
                                    exclude=split.train + split.valid))


# 1. MF-ADG with early stopping: the value of a grid point is its best validation checkpoint.
epoch = split.train.nnz                                   # sampled (u, i+) pairs per epoch
stopping = models.EarlyStopping(every=2 * epoch, metric="adg", patience=2)
mf_grid = [{"l2": l2} for l2 in (0.03, 0.1, 0.3, 1.0)]


def mf_spec(point):
    return models.MFSpec(models.OptADG(dim=16), l2=point["l2"], learning_rate=0.1, early_stopping=stopping)


with tempfile.TemporaryDirectory() as folder, models.store(folder):    # the runner opens one per run
    mf = models.tune(key, mf_grid, mf_spec, split.train, validation=split.valid, pairs=40 * epoch)
    for trial in mf.trials:
        print(f"  MF-ADG l2={trial.point['l2']:<5} validation ADG {trial.value:.4f} after {trial.budget} pairs"
              f" ({len(trial.curve)} checkpoints)")
    print(f"MF-ADG selects {dict(mf.selection.point)}; at the edge of its grid: {mf.selection.edges or 'none'}")
    # The selected model, asked for again (by a report, another cell, another study): read from the store.
    start = time.perf_counter()
    model = models.fitted(key, mf_spec(mf.selection.point), split.train, validation=split.valid, pairs=40 * epoch)
    print(f"the selected MF-ADG read back in {time.perf_counter() - start:.3f} s: test ADG {test_adg(model):.4f}")

# 2. EASE: no early stopping, so tune needs value=(fitted model -> validation value).
def validation_adg(model) -> float:
    return metrics.mean(metrics.adg(lambda users: models.score(model, users), split.valid, exclude=split.train))


ease = models.tune(None, [{"l2": l2} for l2 in (1.0, 10.0, 100.0, 1000.0)], lambda p: models.EASESpec(p["l2"]),
                   split.train, value=validation_adg)
for trial in ease.trials:
    print(f"  EASE l2={trial.point['l2']:<6} validation ADG {trial.value:.4f}")
print(f"EASE selects {dict(ease.selection.point)}; at the edge of its grid: {ease.selection.edges or 'none'}"
      + ("  <- widen the grid on that side" if ease.selection.edges else ""))

print(f"the selected EASE refitted on train + valid: test ADG "
      f"{test_adg(models.fit(None, models.EASESpec(ease.selection.point['l2']), split.train + split.valid)):.4f}")
