"""A hand-built feed shared by the estimator tests of the studies: a position-based model with the
log discount and no violations, contexts x items with uniform qualities, an epsilon-greedy
logger around noisy scores, and the best and worst deterministic targets."""
from typing import NamedTuple

import numpy as np

from simrec import feed

X, A, K = 12, 10, 6          # contexts, items, feed length


class HandFeed(NamedTuple):
    quality: np.ndarray          # f32[X, A]
    activity: np.ndarray         # f32[X]
    scenario: feed.Scenario
    logger_scores: np.ndarray    # f32[X, A], quality + N(0, 0.3²)
    logger: feed.Policy          # epsilon-greedy (0.2) around a sort of logger_scores
    better: feed.Policy          # sort by quality
    worse: feed.Policy           # sort by -quality


def hand_feed(seed: int) -> HandFeed:
    rng = np.random.default_rng(seed)
    quality = rng.uniform(0.0, 0.6, (X, A)).astype(np.float32)
    activity = rng.dirichlet(np.ones(X)).astype(np.float32)
    scenario = feed.Scenario(feed.Logarithmic(), (feed.from_table(quality),), activity, ("click",))
    logger_scores = (quality + rng.normal(0, 0.3, (X, A))).astype(np.float32)
    logger = feed.Policy(feed.all_items(A), feed.EpsilonGreedy(feed.Sort(feed.from_table(logger_scores)), 0.2), K)
    better = feed.Policy(feed.all_items(A), feed.Sort(feed.from_table(quality)), K)
    worse = feed.Policy(feed.all_items(A), feed.Sort(feed.from_table(-quality)), K)
    return HandFeed(quality, activity, scenario, logger_scores, logger, better, worse)
