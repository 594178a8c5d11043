"""Benchmark ``simrec bench metrics``: full-catalogue metrics on 10,000 users x 10,000 items.

Scores are dense random f32 (tie-free), each user has ~20 relevant and ~50 excluded items. The
timed work is ADG, DCG, nDCG, AP, ATOP, AUC, nDCG@10, Recall@10 and nDCG@100 for every user, after
a warm-up call (compilation is reported separately). Side by side, in the same run:

* a plain vectorised numpy implementation (argsort of every row, then the same formulas) — what a
  careful user would write by hand; it also cross-checks the values;
* RecPack's metric classes (NDCGK, RecallK, DCGK) when a RecPack interpreter is available. RecPack
  pins numpy < 2, so it runs in its own virtual environment: pass ``--recpack-python PATH`` or set
  ``SIMREC_RECPACK_PYTHON``; ``--setup-recpack DIR`` creates one with a Python 3.10 (or 3.9) found
  on PATH or under pyenv: ``python3.10 -m venv DIR && DIR/bin/pip install recpack``.

Usage: ``simrec bench metrics [--users N] [--items N] [--repeats R] [--recpack-python PATH]``.
"""
from __future__ import annotations

import argparse
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


def numpy_baseline(scores, relevant, excluded, block: int = 1000) -> dict[str, np.ndarray]:
    """Plain numpy: argsort each row (excluded last), position of every relevant item, formulas."""
    n_users, n_items = scores.shape
    out = {s: np.empty(n_users) for s in SPECS}
    disc = 1.0 / np.log2(np.arange(n_items) + 2.0)
    for start in range(0, n_users, block):
        stop = min(start + block, n_users)
        s = scores[start:stop].copy()
        ex = excluded[start:stop].toarray()
        rel = relevant[start:stop].toarray() & ~ex
        s[ex] = -np.inf
        order = np.argsort(-s, axis=1, kind="stable")
        rel_sorted = np.take_along_axis(rel, order, axis=1)
        n_rel = rel.sum(1)
        n_ok = n_items - ex.sum(1)
        hits = np.cumsum(rel_sorted, axis=1)
        pos = np.arange(n_items)
        dcg_full = (rel_sorted * disc).sum(1)
        idcg = np.cumsum(disc)
        with np.errstate(invalid="ignore", divide="ignore"):
            out["dcg"][start:stop] = dcg_full
            out["adg"][start:stop] = dcg_full / n_rel
            out["ndcg"][start:stop] = dcg_full / idcg[n_rel - 1]
            for k in (10, 100):
                d = (rel_sorted[:, :k] * disc[:k]).sum(1)
                out[f"ndcg@{k}"][start:stop] = d / idcg[np.minimum(n_rel, k) - 1]
            out["recall@10"][start:stop] = rel_sorted[:, :10].sum(1) / n_rel
            out["ap"][start:stop] = (rel_sorted * hits / (pos + 1)).sum(1) / n_rel
            out["atop"][start:stop] = (rel_sorted * (n_ok[:, None] - pos)).sum(1) / n_ok / n_rel
            n_irr = n_ok - n_rel
            irrelevant_above = np.cumsum(~rel_sorted & (pos < n_ok[:, None]), axis=1)
            out["auc"][start:stop] = (rel_sorted * (n_irr[:, None] - irrelevant_above)).sum(1) / n_rel / n_irr
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="simrec bench metrics", description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--relevant", type=int, default=20)
    parser.add_argument("--excluded", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--recpack-python", default=os.environ.get("SIMREC_RECPACK_PYTHON"))
    parser.add_argument("--setup-recpack", metavar="DIR", default=None)
    args = parser.parse_args(argv)

    import jax

    from simrec import metrics
    scores, relevant, excluded = make_data(args.users, args.items, args.relevant, args.excluded)
    device_scores = jax.device_put(scores)
    print(f"catalogue {args.users} users x {args.items} items, {args.relevant} relevant and "
          f"{args.excluded} excluded per user; jax {jax.__version__} on {jax.devices()[0].platform}, "
          f"{os.cpu_count()} cpus")

    t0 = time.perf_counter()
    ours = metrics.evaluate(device_scores, relevant, exclude=excluded, metrics=SPECS)
    first = time.perf_counter() - t0
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        ours = metrics.evaluate(device_scores, relevant, exclude=excluded, metrics=SPECS)
        times.append(time.perf_counter() - t0)
    simrec_time = min(times)

    times = []
    for _ in range(max(1, args.repeats - 1)):
        t0 = time.perf_counter()
        base = numpy_baseline(scores, relevant, excluded)
        times.append(time.perf_counter() - t0)
    numpy_time = min(times)
    worst = max(float(np.nanmax(np.abs(ours[s] - base[s]))) for s in SPECS)

    rows = [("simrec (all 9 metrics, after warm-up)", simrec_time, 1.0),
            ("numpy argsort baseline (all 9 metrics)", numpy_time, numpy_time / simrec_time)]
    python = args.recpack_python or (setup_recpack(args.setup_recpack) if args.setup_recpack else None)
    recpack_note = "RecPack unavailable: pass --recpack-python or --setup-recpack DIR"
    if python:
        rp = run_recpack(python, scores, relevant, excluded)
        if isinstance(rp, str):
            recpack_note = rp
        else:
            total = sum(rp["times"].values())
            rows.append(("RecPack NDCGK@10+RecallK@10+NDCGK@100+DCGK@100", total, total / simrec_time))
            recpack_note = "RecPack values: " + ", ".join(f"{k}={v:.6f}" for k, v in rp["values"].items()) \
                + f"; simrec: ndcg@10={metrics.mean(ours['ndcg@10']):.6f}, " \
                  f"recall@10={metrics.mean(ours['recall@10']):.6f}, ndcg@100={metrics.mean(ours['ndcg@100']):.6f}"

    print(f"\nfirst call (cold caches, thread pool start): {first:.3f}s")
    print(f"{'implementation':<52} {'seconds':>9} {'x simrec':>9}")
    for name, t, ratio in rows:
        print(f"{name:<52} {t:9.3f} {ratio:9.2f}")
    tied_rows = int(sum(len(np.unique(row)) < len(row) for row in scores[:1000]))
    print(f"max |simrec - numpy| over users and metrics: {worst:.2e} (float32 scores tie in "
          f"{tied_rows} of the first 1000 rows: numpy's argsort orders ties by index, simrec "
          f"takes the expectation over tie orders)")
    print(recpack_note)
    target = simrec_time <= 1.0 and numpy_time / simrec_time >= 2.0
    print(f"target (<= 1.0 s and >= 2x numpy): {'met' if target else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
