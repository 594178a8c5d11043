"""Benchmark ``simrec bench metrics``: full-catalogue metrics on 10,000 users x 10,000 items.

Scores are dense random f32 (a JAX array), each user has ~20 relevant and ~50 excluded items. The
timed work is ADG, DCG, nDCG, AP, ATOP, AUC, nDCG@10, Recall@10 and nDCG@100 for every user, after
a warm-up call (reported separately; this path compiles nothing). simrec is timed twice, with the
relevant/excluded masks as dense boolean arrays and as CSR matrices, and side by side, in the same
run:

* the strongest plain numpy version we could write (single-threaded): per block of users, sort
  every row once and find each relevant item's position with ``np.searchsorted``, then the plain
  formulas — it also cross-checks the values on rows without tied scores;
* RecPack's metric classes (NDCGK, RecallK, DCGK) when a RecPack interpreter is available. RecPack
  pins numpy < 2, so it runs in its own virtual environment: pass ``--recpack-python PATH`` or set
  ``SIMREC_RECPACK_PYTHON``; ``--setup-recpack DIR`` creates one with a Python 3.10 (or 3.9) found
  on PATH or under pyenv: ``python3.10 -m venv DIR && DIR/bin/pip install recpack``.

Usage: ``simrec bench metrics [--users N] [--items N] [--repeats R] [--recpack-python PATH]``.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from simrec_studies._bench_args import Parser, non_negative_int, positive_int, usage_errors

SPECS = ("adg", "dcg", "ndcg", "ap", "atop", "auc", "ndcg@10", "recall@10", "ndcg@100")


def make_data(n_users: int, n_items: int, n_relevant: int, n_excluded: int, seed: int = 0):
    """Random tie-free scores f32[U, I]; relevant and excluded as disjoint CSR sets per user."""
    rng = np.random.default_rng(seed)
    scores = rng.standard_normal((n_users, n_items), dtype=np.float32)
    chosen = np.stack([rng.choice(n_items, n_relevant + n_excluded, replace=False)
                       for _ in range(n_users)])
    rows = np.repeat(np.arange(n_users), n_relevant)
    relevant = sp.csr_matrix((np.ones(rows.size, bool), (rows, chosen[:, :n_relevant].ravel())),
                             shape=(n_users, n_items))
    rows = np.repeat(np.arange(n_users), n_excluded)
    excluded = sp.csr_matrix((np.ones(rows.size, bool), (rows, chosen[:, n_relevant:].ravel())),
                             shape=(n_users, n_items))
    return scores, relevant, excluded


def _mask_rows(mask, start: int, stop: int) -> np.ndarray:
    """bool[stop - start, I]: rows of a dense or sparse mask."""
    part = mask[start:stop]
    return part.toarray() if sp.issparse(part) else np.asarray(part, bool)


def numpy_baseline(scores, relevant, excluded, block: int = 1000) -> dict[str, np.ndarray]:
    """Plain numpy, one thread: per block of users, sort each row once (excluded items at -inf),
    find every relevant item's position p = #non-excluded items above it with `np.searchsorted`,
    then the plain (tie-free) formulas of DESIGN.md from the positions. Masks dense or sparse."""
    n_users, n_items = scores.shape
    out = {s: np.full(n_users, np.nan) for s in SPECS}
    idcg = np.concatenate([[0.0], np.cumsum(1.0 / np.log2(np.arange(n_items) + 2.0))])
    for start in range(0, n_users, block):
        stop = min(start + block, n_users)
        ex = _mask_rows(excluded, start, stop)
        rel = _mask_rows(relevant, start, stop) & ~ex
        s = np.where(ex, -np.inf, scores[start:stop])
        ordered = np.sort(s, axis=1)
        rows, items = np.divmod(np.flatnonzero(rel), n_items)
        value = s[rows, items]
        bounds = np.searchsorted(rows, np.arange(stop - start + 1))
        pos = np.empty(len(rows), np.int64)
        for r in range(stop - start):
            seg = slice(bounds[r], bounds[r + 1])
            pos[seg] = n_items - np.searchsorted(ordered[r], value[seg], side="right")
        order = np.lexsort((pos, rows))                # j = relevant items above, per user
        j = np.empty(len(rows), np.int64)
        j[order] = np.arange(len(rows)) - bounds[rows[order]]
        n_rel, n_ok = np.diff(bounds), n_items - ex.sum(1)
        n_ok_pair = n_ok[rows]
        disc = 1.0 / np.log2(pos + 2.0)

        def per_user(values):
            return np.bincount(rows, weights=values, minlength=stop - start)
        with np.errstate(invalid="ignore", divide="ignore"):
            dcg = per_user(disc)
            got = {"dcg": dcg, "adg": dcg / n_rel, "ndcg": dcg / idcg[n_rel],
                   "recall@10": per_user((pos < 10).astype(float)) / n_rel,
                   "ap": per_user((j + 1) / (pos + 1)) / n_rel,
                   "atop": per_user((n_ok_pair - pos) / n_ok_pair) / n_rel,
                   "auc": per_user((n_ok_pair - 1 - pos) - (n_rel[rows] - 1 - j))
                   / n_rel / (n_ok - n_rel)}
            for k in (10, 100):
                got[f"ndcg@{k}"] = per_user(disc * (pos < k)) / idcg[np.minimum(n_rel, k)]
        for spec, values in got.items():
            out[spec][start:stop] = np.where(n_rel > 0, values, np.nan)
    return out


_RECPACK_SCRIPT = r"""
import json, sys, time
import numpy as np, scipy.sparse as sp
from recpack.metrics import NDCGK, RecallK, DCGK
data = np.load(sys.argv[1])
scores = data["scores"]
shape = scores.shape
rel = sp.csr_matrix((data["rel_data"], data["rel_indices"], data["rel_indptr"]), shape=shape)
# excluded items never enter a top-K: give them the lowest score
ex = sp.csr_matrix((data["ex_data"], data["ex_indices"], data["ex_indptr"]), shape=shape).toarray()
pred = scores - scores.min() + 1.0
pred[ex] = 0.0
pred = sp.csr_matrix(pred)
res, times = {}, {}
for name, metric in (("ndcg@10", NDCGK(10)), ("recall@10", RecallK(10)), ("ndcg@100", NDCGK(100)),
                     ("dcg@100", DCGK(100))):
    t0 = time.perf_counter()
    metric.calculate(rel, pred)
    times[name] = time.perf_counter() - t0
    res[name] = float(metric.value)
print(json.dumps({"times": times, "values": res}))
"""


def run_recpack(python: str, scores, relevant, excluded) -> dict | str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.npz"
        np.savez(path, scores=scores, rel_data=relevant.data, rel_indices=relevant.indices,
                 rel_indptr=relevant.indptr, ex_data=excluded.data, ex_indices=excluded.indices,
                 ex_indptr=excluded.indptr)
        script = Path(tmp) / "recpack_bench.py"
        script.write_text(_RECPACK_SCRIPT)
        proc = subprocess.run([python, str(script), str(path)], capture_output=True, text=True)
        if proc.returncode != 0:
            return f"RecPack run failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr else proc.returncode}"
        return json.loads(proc.stdout.strip().splitlines()[-1])


def _old_python() -> str:
    """An interpreter RecPack supports (3.9 or 3.10): on PATH, or under pyenv."""
    candidates = ["python3.10", "python3.9", *sorted(glob.glob(os.path.expanduser(
        "~/.pyenv/versions/3.1[0]*/bin/python3.10")) + glob.glob(os.path.expanduser(
        "~/.pyenv/versions/3.9*/bin/python3.9")))]
    for candidate in candidates:
        if not (shutil.which(candidate) or os.path.exists(candidate)):
            continue
        if subprocess.run([candidate, "--version"], capture_output=True).returncode == 0:
            return candidate
    raise SystemExit("no Python 3.9/3.10 found for RecPack's virtual environment")


def setup_recpack(folder: str) -> str:
    """Create ``folder`` as a virtual environment with RecPack (its numpy < 2 pin stays there)."""
    subprocess.run([_old_python(), "-m", "venv", folder], check=True)
    subprocess.run([f"{folder}/bin/pip", "install", "-q", "recpack"], check=True)
    return f"{folder}/bin/python"


@usage_errors
def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="simrec bench metrics", description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=positive_int, default=10_000)
    parser.add_argument("--items", type=positive_int, default=10_000)
    parser.add_argument("--relevant", type=positive_int, default=20, help="relevant items per user")
    parser.add_argument("--excluded", type=non_negative_int, default=50, help="excluded items per user")
    parser.add_argument("--repeats", type=positive_int, default=3)
    parser.add_argument("--recpack-python", default=os.environ.get("SIMREC_RECPACK_PYTHON"))
    parser.add_argument("--setup-recpack", metavar="DIR", default=None)
    args = parser.parse_args(argv)
    if args.relevant + args.excluded > args.items:
        parser.error(f"--relevant {args.relevant} + --excluded {args.excluded} exceeds --items {args.items}: "
                     "each user's relevant and excluded items are distinct items of the catalogue")

    import jax

    from simrec import metrics
    scores, relevant, excluded = make_data(args.users, args.items, args.relevant, args.excluded)
    dense_relevant, dense_excluded = relevant.toarray(), excluded.toarray()
    device_scores = jax.device_put(scores).block_until_ready()   # not part of the warm-up
    print(f"catalogue {args.users} users x {args.items} items, {args.relevant} relevant and "
          f"{args.excluded} excluded per user; jax {jax.__version__} on {jax.devices()[0].platform}, "
          f"{os.cpu_count()} cpus")

    def best_of(repeats: int, run):
        """(fastest wall time of `repeats` calls, the last call's result)."""
        times = []
        for _ in range(max(1, repeats)):
            t0 = time.perf_counter()
            result = run()
            times.append(time.perf_counter() - t0)
        return min(times), result

    def simrec(relevant_mask, excluded_mask):
        return lambda: metrics.evaluate(device_scores, relevant_mask, exclude=excluded_mask,
                                        metrics=SPECS)

    first, _ = best_of(1, simrec(dense_relevant, dense_excluded))
    dense_time, ours = best_of(args.repeats, simrec(dense_relevant, dense_excluded))
    csr_time, ours_csr = best_of(args.repeats, simrec(relevant, excluded))
    numpy_time, base = best_of(args.repeats - 1, lambda: numpy_baseline(scores, dense_relevant,
                                                                         dense_excluded))
    tie_free = np.concatenate([np.all(np.diff(np.sort(scores[a:a + 1000], axis=1), axis=1) != 0, axis=1)
                               for a in range(0, args.users, 1000)])
    worst = max(float(np.nanmax(np.abs(ours[s] - base[s])[tie_free], initial=0.0)) for s in SPECS)
    same = all(np.array_equal(ours[s], ours_csr[s], equal_nan=True) for s in SPECS)

    rows = [("simrec, dense bool masks (9 metrics)", dense_time),
            ("simrec, CSR masks (9 metrics)", csr_time),
            ("numpy row sort + searchsorted, 1 thread (9 metrics)", numpy_time)]
    python = args.recpack_python or (setup_recpack(args.setup_recpack) if args.setup_recpack else None)
    recpack_note = "RecPack unavailable: pass --recpack-python or --setup-recpack DIR"
    if python:
        rp = run_recpack(python, scores, relevant, excluded)
        if isinstance(rp, str):
            recpack_note = rp
        else:
            rows.append(("RecPack NDCGK@10+RecallK@10+NDCGK@100+DCGK@100", sum(rp["times"].values())))
            recpack_note = "RecPack values: " + ", ".join(f"{k}={v:.6f}" for k, v in rp["values"].items()) \
                + f"; simrec: ndcg@10={metrics.mean(ours['ndcg@10']):.6f}, " \
                  f"recall@10={metrics.mean(ours['recall@10']):.6f}, ndcg@100={metrics.mean(ours['ndcg@100']):.6f}"

    print(f"\nwarm-up (first) call, dense masks: {first:.3f}s (nothing is jit-compiled on this path)")
    print(f"{'implementation':<56} {'seconds':>9} {'x simrec dense':>15}")
    for name, t in rows:
        print(f"{name:<56} {t:9.3f} {t / dense_time:15.2f}")
    print(f"dense and CSR masks give identical values: {'yes' if same else 'NO'}")
    print(f"max |simrec - numpy| over the {int(tie_free.sum())} users without tied scores: "
          f"{worst:.2e} (on tied rows numpy counts one tie order, simrec the expectation over all)")
    print(recpack_note)
    ratio = numpy_time / dense_time
    target = dense_time <= 0.5
    print(f"target (dense masks <= 0.5 s): {'met' if target else 'NOT met'}; numpy baseline / "
          f"simrec dense = {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
