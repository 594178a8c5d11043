"""A small simulation and its estimates, run by tests/test_sharding.py in its own process (one
device), in a subprocess with 3 emulated devices, or as one of two `jax.distributed` processes on
localhost.

``python -m tests.sharding_job [COORDINATOR PROCESSES ID]`` prints (process 0 only) the JSON line of
`report`: the device count and process count, a SHA-256 of every array the library's sharded
functions returned (a log with fatigue and a cascade, exact and Monte Carlo exposure tables, Factors
metrics) and the sweeps' estimates as hexadecimal floats, so that runs compare bit for bit.
"""
from __future__ import annotations

import hashlib
import json
import sys

import numpy as np


def digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(np.asarray(a))
        h.update(str((a.dtype, a.shape)).encode() + a.tobytes())
    return h.hexdigest()[:16]


def report() -> dict | None:
    """The devices and digests of this process's run (None on a process other than the writer)."""
    import jax
    import jax.numpy as jnp

    from simrec import feed, metrics, ope, sharding

    rng = np.random.default_rng(0)
    X, A, K = 24, 30, 5
    table = lambda: feed.from_table(rng.normal(size=(X, A)).astype(np.float32))     # noqa: E731
    quality = feed.from_table(rng.uniform(0, 0.6, (X, A)).astype(np.float32))
    logger = feed.Policy(feed.all_items(A), feed.PlackettLuce(table(), jnp.float32(0.7)), K)
    target = feed.Policy(feed.all_items(A), feed.EpsilonGreedy(feed.Sort(table()), jnp.float32(0.1)), K)
    view = feed.Cascade(feed.Exponential(jnp.float32(0.8)), stop_signal=0, stop_probability=jnp.float32(0.3))
    scenario = feed.Scenario(view, (quality,), jnp.full(X, 1 / X, jnp.float32), ("like",),
                             satiation=0.1, fatigue=0.2)
    contexts = np.arange(X)
    logging_table = feed.exposure(jax.random.key(1), logger, view, contexts, num_samples=20)
    target_table = feed.exposure(None, target, view, contexts)
    # a random candidate set + Plackett-Luce: exposures by Monte Carlo (the logger's are exact)
    subset = feed.Policy(feed.RandomSubset(A, 12), feed.PlackettLuce(table(), jnp.float32(0.7)), K)
    sampled = feed.exposure(jax.random.key(4), subset, view, contexts, num_samples=20)
    # 1000 sessions in chunks of 256 (rounds of 64): several chunks, the last one cut
    log = feed.simulate(jax.random.key(2), scenario, logger, 1000, logging_exposure=logging_table.mean,
                        chunk_size=256, round_size=64)
    e0 = ope.logged_exposures(log, logging_table.mean)
    e = ope.logged_exposures(log, target_table.mean)
    m = np.array([1.0, 3.0, np.inf])
    q_hat = np.asarray(quality.params) * 0.9
    direct = ope.direct_method(q_hat, target_table.mean)[log.users]
    predicted = jnp.asarray(q_hat)[log.users[:, None], jnp.maximum(log.items, 0)]
    # the sweeps sum blocks of 2^16 trajectories (K = 5): tile the log to 3 blocks and a tail
    tiled = [jnp.tile(a, (197, 1)) for a in (log.rewards[0], e0, e, log.viewed, predicted)]
    dcg = ope.dcg_sweep(*tiled[:4], m)
    dr = ope.dr_sweep(*tiled, jnp.tile(direct, 197), m)
    factors = metrics.Factors(jnp.asarray(rng.normal(size=(40, 4)), jnp.float32),
                              jnp.asarray(rng.normal(size=(A, 4)), jnp.float32), jnp.zeros(A, jnp.float32))
    relevant = rng.random((40, A)) < 0.2
    scores = metrics.evaluate(factors, relevant, exclude=(rng.random((40, A)) < 0.1) & ~relevant,
                              metrics=("ndcg", "auc"))
    if not sharding.is_writer():
        return None
    return {"devices": jax.device_count(), "processes": jax.process_count(),
            "log": digest(log.users, log.items, log.viewed, log.rewards, log.logging_exposure),
            "exposure": digest(logging_table.mean, logging_table.standard_error, target_table.mean,
                               sampled.mean, sampled.standard_error),
            "metrics": digest(scores["ndcg"], scores["auc"]),
            "dcg": [float(v).hex() for v in (*dcg.value, *dcg.standard_error)],
            "dr": [float(v).hex() for v in (*dr.value, *dr.standard_error)]}


def main(argv: list[str]) -> None:
    from simrec import sharding
    if argv:
        sharding.initialize(argv[0], int(argv[1]), int(argv[2]))
    result = report()
    if result is not None:
        print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
