"""Quickstart: a simulated world, a logged feed, off-policy estimates, and the exact online truth.

A logging policy (a noisy ranker that explores 30 % of the time) shows 10 items per session. From
its log we estimate how an oracle ranker would do, with every registered estimator (DCG as clipped
IPS, nDCG with two ideals, pnDCG, SN-DCG) at three clipping values m, each as a value and as a
difference against the logger, and compare with the exact online values of both policies.
This file is the README's example; docs/guide/quickstart.md walks through it.
Run: python examples/quickstart.py   (about 10 s on a 2-core CPU, most of it compiling)
"""
import math

import jax
import numpy as np

from simrec import feed, ope, world

key = jax.random.key(0)
w = world.make_world(key, world.WorldConfig(n_users=500, n_items=200))
users = np.arange(w.n_users)
q = np.asarray(world.quality(w, users))                          # true click probability q(u, i)
view = feed.Exponential(0.8)                                     # P(user views rank i) = 0.8^(i-1)
scenario = feed.scenario_from_world(w, view)                     # contexts: the users; signal "click": q(u, i)
noisy = q + np.random.default_rng(0).normal(0, 0.2, q.shape).astype(np.float32)
catalogue = feed.all_items(w.n_items)                            # every item is a candidate
policies = {"logger": feed.Policy(catalogue, feed.EpsilonGreedy(feed.Sort(feed.from_table(noisy)), 0.3), 10),
            "oracle": feed.Policy(catalogue, feed.Sort(feed.from_table(q)), 10)}    # 10 items per session
log = feed.simulate(key, scenario, policies["logger"], 50_000)   # 50,000 sessions; only viewed items are logged
exposure = {name: ope.logged_exposures(log, feed.exposure(None, p, view, users).mean)   # ε(x, a) of each logged item
            for name, p in policies.items()}
data = ope.LoggedData(log.rewards[0], log.viewed, exposure["logger"], discount=feed.view_probability(view, 10))
targets = {name: ope.Target(e) for name, e in exposure.items()}
table = ope.compare(data, targets, [1.0, 10.0, math.inf], baseline="logger")   # every estimator, 3 values of m
print(table[table.target == "oracle"].round(4).to_string(index=False))
truth = {name: float(feed.online_value(None, scenario, p).mean[0]) for name, p in policies.items()}
print(f"exact online clicks per session: logger {truth['logger']:.4f}, oracle {truth['oracle']:.4f}, "
      f"difference {truth['oracle'] - truth['logger']:.4f}")
