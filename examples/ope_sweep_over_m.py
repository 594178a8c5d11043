"""Off-policy estimates over the clipping value m: how DCG and nDCG differences between a target
and the logger compare with the exact online difference (Jeunen, Potapov & Ustimenko, KDD'24 §6).

DCG as clipped IPS weights a logged click by min(m, 1/ε₀) · ε: m = 1 uses the raw logged labels,
m = ∞ is unbiased under the position-based model (KDD'24 Asm. 1–5) but has the largest variance.
One log of an exploring logger, three target rankers, every m at once (`simrec.ope.compare`), and
the exact online value of every policy (`simrec.feed.online_value`) to score the estimates.
Run: python examples/ope_sweep_over_m.py   (about 15 s on a 2-core CPU; SESSIONS=5000 for less)
"""
import math
import os

import jax
import numpy as np
import pandas as pd

from simrec import feed, ope, world

SESSIONS = int(os.environ.get("SESSIONS", 50_000))              # logged sessions
M = [1.0, 2.0, 4.0, 8.0, 16.0, 64.0, 256.0, math.inf]            # clipping values
K = 10                                                           # items shown per session

# The world and its feed: true click probabilities q(u, i), who opens the feed, how far they scroll.
key = jax.random.key(0)
w = world.make_world(key, world.WorldConfig(n_users=500, n_items=200))
users = np.arange(w.n_users)
q = np.asarray(world.quality(w, users))
view = feed.Exponential(0.8)
scenario = feed.scenario_from_world(w, view)
rng = np.random.default_rng(0)


def ranker(noise: float) -> feed.Sort:
    """Sort by the true quality plus Gaussian noise of this scale: less noise, a better ranker."""
    return feed.Sort(feed.from_table(q + rng.normal(0, noise, q.shape).astype(np.float32)))


def call(rows: pd.DataFrame) -> pd.Series:
    """What the 99 % confidence interval of a difference says: a gain, a loss, or no call (-)."""
    return pd.Series(np.where(rows.low > 0, "gain", np.where(rows.high < 0, "loss", "-")), index=rows.index)


# The logger explores 30 % of the time (so every item has some exposure ε₀ > 0); targets do not.
catalogue = feed.all_items(w.n_items)
policies = {"logger": feed.Policy(catalogue, feed.EpsilonGreedy(ranker(0.2), 0.3), K),
            "better": feed.Policy(catalogue, ranker(0.1), K),
            "about as good": feed.Policy(catalogue, ranker(0.4), K),
            "worse": feed.Policy(catalogue, ranker(1.0), K)}
log = feed.simulate(key, scenario, policies["logger"], SESSIONS)

# Each policy's exposure ε(x, a) of every logged item; the logger's is ε₀, the logged propensity.
exposures = {name: ope.logged_exposures(log, feed.exposure(None, p, view, users).mean) for name, p in policies.items()}
data = ope.LoggedData(log.rewards[0], log.viewed, exposures["logger"], discount=feed.view_probability(view, K))
table = ope.compare(data, {name: ope.Target(e) for name, e in exposures.items()}, M,
                    estimators=["dcg", "ndcg"], baseline="logger")

# The truth: exact expected clicks per session of every policy, and the target-minus-logger differences.
online = {name: float(feed.online_value(None, scenario, p).mean[0]) for name, p in policies.items()}
smallest = float(np.min(np.asarray(exposures["logger"])[np.asarray(log.viewed)]))      # min ε₀ of a viewed item
print(f"{SESSIONS} logged sessions; exact online clicks per session of the logger: {online['logger']:.4f}; "
      f"smallest logged exposure {smallest:.4f}, so m >= {1 / smallest:.0f} clips nothing")
for target in ("better", "about as good", "worse"):
    truth = online[target] - online["logger"]
    rows = table[table.target == target].set_index(["estimator", "m"])
    dcg, ndcg = rows.loc["dcg"], rows.loc["ndcg"]
    print(f"\ntarget {target!r}: exact online difference {truth:+.4f}")
    print(pd.DataFrame({"DCG difference": dcg.difference, "± SE": dcg.se, "bias": dcg.difference - truth,
                        "DCG call": call(dcg), "nDCG difference": ndcg.difference, "nDCG call": call(ndcg)})
          .round(4).to_string())
