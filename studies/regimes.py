"""Study ``regimes``: where do the offline-evaluation verdicts of Jeunen, Potapov & Ustimenko
(KDD'24 §6) hold? Verdict maps over the dials that decide them.

The paper draws four conclusions from one production regime (40M users a day, one deployed change
of a deterministic ranker, candidate generator G fixed in §6.1):

* (a) DCG (pbm, Q̂) tracks online reward over days (Table 2: strong positive Pearson r);
* (b) nDCG tracks it worse, even with the opposite sign (Table 2's negative r);
* (c) a learnt position model (pbm) and debiased labels Q̂ beat the log discount and raw labels C;
* (d) clipped DCG detects true online improvements with few false positives, best at a moderate
  clipping m (Fig. 1).

Here every conclusion is re-tested on a grid of regimes of the `simrec_studies.scenarios` feed
(one level, the scroll-budget view model, no violations of Asm. 1–5 except Asm. 5 when G′ ≠ G):

* exploration of the logger R₀ — epsilon-greedy around Sort(r0) (``epsilon``), or Plackett–Luce
  over r0's scores standardised per user, at temperature ``temperature`` (a smooth, rank-dependent
  exploration; its placement probabilities P(a at rank i | x) are estimated once per cell from
  `exposure_samples` sampled rankings per user, `placement`, and give its exposures under every
  day's view model);
* the logged sessions per day (``log_sessions``: the noise of one day's estimate);
* the drift mix: the global day factors' total sd ``global_drift`` split into session length and
  engagement with ``session_share`` (share of variance from session length);
* two drifts that are not global (`scenarios.DriftConfig`): a per-item random walk in the item
  bias (``item_walk``: trends and churn that move the target's and the logger's items
  differently) and a random walk in the view model's session-length factor (``view_walk``:
  examination that drifts, which a fixed log discount cannot follow and a pbm learnt per day can);
* a target that changes the candidate generator (``generator_shift`` λ): G′ = the top N per user of
  (1 − λ)·z(retrieval) + λ·z(rt scores), z = standardised per user (λ = 0: G′ = G exactly; λ = 1:
  the target retrieves with its own scores, and part of its exposure falls on items the logger
  never shows, which no estimator on R₀'s log can see).

A *map* (`MAPS`) varies two dials on a grid, the others stay at `RegimesConfig.dials`. A cell is one
grid point x one replication: `days` consecutive days (replication r: days r·days … (r+1)·days − 1;
the walks persist over absolute days). Each day, R₀ logs `log_sessions` sessions
(`feed.simulate`), the simulator gives the exact online reward of every policy
(Σ_x p(x) Σ_a q(x, a) ε(x, a) under the day's true view model, `table_value`; for the
Plackett–Luce logger with its estimated exposures), and on the log:

* R_t = Sort(rt) on G′ is estimated with DCG {log, pbm} x {C, Q̂} (`ope.dcg_sweep`, m = 1 and ∞) and
  nDCG (pbm, Q̂) with sessions without positive label skipped or counted as 0 (`ope.trajectory_ndcg`)
  — the estimators of study ``correlation`` (Table 2, the labels of `simrec_studies.common.table2.ESTIMATORS`);
* every target of `improving` and `harmful` gets the per-trajectory difference
  Δ_τ(m) = DCG_τ(R_t; m) − DCG_τ(R₀; m) under the learnt pbm, its mean and standard error for the
  whole grid `m` (blocks of sessions, so 10^6 sessions a day fit in memory) — Fig. 1's statistic.

The log and online draws of (replication, day) use the same keys at every grid point (common random
numbers), so neighbouring cells differ by their dials, not by luck. One extra cell (``paper``) runs
the default dials at `paper_sessions` (10^6) logged sessions a day.

Verdicts (`verdicts`), noise-aware over the replications (r per replication's `days`-day series,
correlated against the exact online reward: with 40M users a day the paper's A/B means are exact
to the digits it reports):
(a) holds where mean r >= 0.5 and mean r − 2 SE > 0, fails where mean r + 2 SE < 0.5;
(b) DCG (pbm, Q̂) − nDCG (skip) in r, paired over replications: holds beyond +2 SE, fails below
−2 SE, else tie; "opposite sign" where nDCG's mean r + 2 SE < 0;
(c) DCG (pbm, Q̂) − DCG (log, C) in r, paired likewise;
(d) over the grid point's settings (replications x days x signals x targets): TPR(m) = share of
truly improving settings (exact difference > 0) whose `confidence` normal CI is above 0, FPR(m)
the same share of truly harmful settings, Wilson intervals (statsmodels); holds where the best m
has TPR >= 0.5, FPR <= 0.05 (or no truly harmful setting at that grid point) and is finite with more
detections than m = ∞ beyond 2 SE (paired);
"partly" where the detection and false-positive parts hold but m = ∞ detects as many; fails
otherwise.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from simrec import feed, ope, stats, validate
from simrec.runner import ConfigError, Report, Study, shared_key
from simrec.world import WorldConfig
from simrec_studies import scenarios as S
from simrec_studies.common.table2 import ESTIMATORS

LEVEL = "level1"                     # the scenario level whose settings (view, N, K) the study uses
#: dial -> (the config field holding its grid values, its label in tables and figures)
DIALS = {
    "epsilon": ("epsilons", "logger ε (ε-greedy)"),
    "temperature": ("temperatures", "logger PL temperature"),
    "log_sessions": ("sessions", "logged sessions / day"),
    "session_share": ("session_shares", "session-length share of global drift"),
    "item_walk": ("item_walks", "item random-walk sd / day"),
    "view_walk": ("view_walks", "view random-walk sd / day"),
    "generator_shift": ("generator_shifts", "generator shift λ (G′ vs G)"),
}
#: map -> (x dial, y dial); a map with the temperature dial uses the Plackett–Luce logger
MAPS = {
    "exploration": ("epsilon", "log_sessions"),
    "plackett_luce": ("temperature", "item_walk"),
    "drift": ("session_share", "item_walk"),
    "examination": ("view_walk", "session_share"),
    "generator": ("generator_shift", "epsilon"),
}
PAPER = "paper"                      # the map name of the paper-like cell (default dials, 10^6 sessions)
CORRELATED = ("dcg_log_c", "dcg_log_q", "dcg_pbm_c", "dcg_pbm_q", "ndcg_skip", "ndcg_zero")
TARGET = "rt"                        # the target whose daily estimates are correlated (Table 2's R_t)
#: the record schema: one number per row. map, x, y, replication: the cell (x, y: its dials'
#: values; the paper cell has x = its sessions, y = 0); day: absolute day; signal: a scenario
#: signal or "" (day quantities); target: a ranker label, "R0" (the logger) or ""; quantity: a
#: day quantity (`DAY_QUANTITIES`), "lost" (day −1: target exposure per session on items R₀ never
#: shows, under the log discount, averaged over the base user mix), "online" (exact online reward
#: per session of R₀ or a target), an estimate of
#: `CORRELATED` or "se[...]" its SE (target rt), or "delta" / "delta_se" (mean and SE of Δ_τ(m)); m:
#: the clipping of delta rows, else NaN.
COLUMNS = {"map": str, "x": float, "y": float, "replication": int, "day": int, "signal": str, "target": str,
           "quantity": str, "m": float, "value": float}
DAY_QUANTITIES = ("log_length", "engagement", "depth", "max_weight")
BLOCK = 1 << 16                      # sessions per block of the difference moments


@dataclass(frozen=True)
class Dials:
    """One regime: the value of every dial (`DIALS`) where a map does not vary it."""
    epsilon: float = 0.05            # the ε-greedy logger's exploration, in [0, 1]
    #: the Plackett–Luce logger's temperature over per-user standardised r0 scores (> 0), or 0 for
    #: the ε-greedy logger
    temperature: float = 0.0
    log_sessions: int = 10_000       # sessions R₀ logs per day
    global_drift: float = 0.32       # total sd of the global day factors, sqrt(session² + engagement²)
    session_share: float = 0.5       # share of global_drift's variance from session length, in [0, 1]
    item_walk: float = 0.1           # sd of the daily step of the per-item bias random walk
    view_walk: float = 0.1           # sd of the daily step of the session-length-factor random walk
    #: λ in [0, 1]: the target's generator G′ = top N of (1 − λ) z(retrieval) + λ z(rt scores)
    generator_shift: float = 0.0

    def __post_init__(self):
        for name in ("epsilon", "session_share", "generator_shift"):
            if not 0 <= getattr(self, name) <= 1:
                raise ConfigError(f"dials.{name} must be in [0, 1], got {getattr(self, name)!r}")
        for name in ("temperature", "global_drift", "item_walk", "view_walk"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"dials.{name} must be finite and >= 0, got {value!r}")
        if isinstance(self.log_sessions, bool) or not isinstance(self.log_sessions, int) or self.log_sessions < 2:
            raise ConfigError(f"dials.log_sessions must be an integer >= 2, got {self.log_sessions!r}")


def _platform() -> S.ScenarioConfig:
    """The study's platform: smaller than the correlation default (800 users x 400 items, N = 60
    candidates, K = 20 shown, shorter training), so that a map cell takes seconds."""
    world = WorldConfig(n_users=800, n_items=400, dim=4, affinity_scale=3.5, popularity_exponent=0.3, offset=-5.5)
    level = S.LevelConfig(candidates=60, feed_length=20)
    return S.ScenarioConfig(world=world, level1=level,
                            level2=dataclasses.replace(S.PRESETS["default"].level2, candidates=60, feed_length=20),
                            rankers=S.RankerConfig(r0_pairs=50_000, rt_pairs=200_000), days=7)


@dataclass(frozen=True)
class RegimesConfig:
    """The regimes study's settings (module docstring)."""
    #: platform, view model, signals and rankers (`simrec_studies.scenarios`; level1 is used, its
    #: epsilon and the drift are set by the dials); scenario.days = days per replication
    scenario: S.ScenarioConfig = field(default_factory=_platform)
    dials: Dials = field(default_factory=Dials)        # the regime where a map does not vary a dial
    maps: tuple[str, ...] = tuple(MAPS)                # the maps computed (names of `MAPS`)
    epsilons: tuple[float, ...] = (0.01, 0.05, 0.2)    # grid of the epsilon dial
    temperatures: tuple[float, ...] = (0.5, 1.0, 2.0)  # grid of the temperature dial (Plackett–Luce)
    sessions: tuple[int, ...] = (1_000, 10_000, 100_000)   # grid of the log_sessions dial
    session_shares: tuple[float, ...] = (0.0, 0.5, 1.0)    # grid of the session_share dial
    item_walks: tuple[float, ...] = (0.0, 0.1, 0.3)        # grid of the item_walk dial
    view_walks: tuple[float, ...] = (0.0, 0.1, 0.3)        # grid of the view_walk dial
    generator_shifts: tuple[float, ...] = (0.0, 0.5, 1.0)  # grid of the generator_shift dial
    replications: int = 2            # replications per grid point (disjoint day ranges), >= 2 for an SE
    #: logged sessions a day of the paper-like cell (default dials, replication 0..paper_replications-1);
    #: 0 = no such cell
    paper_sessions: int = 1_000_000
    paper_replications: int = 1      # replications of the paper-like cell
    paper_days: int = 5              # days of the paper-like cell (KDD'24 §6.2 uses 5 days, Table 2 seven)
    #: rankers of deterministic targets intended to beat R₀ (the first must be rt, the Table 2 target)
    improving: tuple[S.RankerField, ...] = (S.Trained("rt"), S.NoisyOracle(2.0))
    #: rankers of deterministic targets intended to lose to R₀ (false-positive checks)
    harmful: tuple[S.RankerField, ...] = (S.NoisyOracle(8.0),)
    m: tuple[float, ...] = (1.0, 8.0, 64.0, 512.0, math.inf)   # clipping grid of (d)
    confidence: float = 0.99         # confidence of the offline CIs of (d) (the paper's 99 %)
    #: rankings sampled per context, once per cell, for the Plackett–Luce logger's placement
    #: probabilities (`placement`), hence its exposures under every view model and its online value
    exposure_samples: int = 128

    def __post_init__(self):
        if not self.maps or not set(self.maps) <= set(MAPS) or len(set(self.maps)) != len(self.maps):
            raise ConfigError(f"maps must be distinct names from {tuple(MAPS)}, got {self.maps!r}")
        for dial, (name, _) in DIALS.items():
            values = getattr(self, name)
            if not values or len(set(values)) != len(values):
                raise ConfigError(f"{name} must hold distinct values, got {values!r}")
            for v in values:
                dataclasses.replace(self.dials, **{dial: v})            # validates the value
        if any(t <= 0 for t in self.temperatures):
            raise ConfigError(f"temperatures must be > 0, got {self.temperatures!r}")
        for name, low in (("replications", 1), ("paper_sessions", 0), ("paper_replications", 1),
                          ("paper_days", 3), ("exposure_samples", 2)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")
        if self.paper_sessions == 1:
            raise ConfigError("paper_sessions must be 0 (no paper cell) or >= 2")
        if self.scenario.days < 3:
            raise ConfigError(f"scenario.days must be >= 3 (a Pearson r per replication), got {self.scenario.days}")
        if not self.improving or self.improving[0] != S.Trained("rt"):
            raise ConfigError(f"improving must start with Trained('rt') (the correlated target), "
                              f"got {self.improving!r}")
        labels = [S.ranker_label(r) for r in self.improving + self.harmful]
        if len(set(labels)) != len(labels) or "r0" in labels:
            raise ConfigError(f"improving and harmful must be distinct rankers other than r0, got {labels}")
        try:
            validate.clipping_values("m", self.m)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        if not 0 < self.confidence < 1:
            raise ConfigError(f"confidence must be in (0, 1), got {self.confidence!r}")


def _smoke() -> RegimesConfig:
    world = WorldConfig(n_users=200, n_items=150, dim=4, affinity_scale=3.5, popularity_exponent=0.3, offset=-4.0)
    scenario = dataclasses.replace(S.PRESETS["smoke"], world=world, days=3,
                                   level1=S.LevelConfig(candidates=40, feed_length=20))
    return RegimesConfig(scenario=scenario, dials=Dials(log_sessions=1000), maps=("exploration", "generator"),
                         epsilons=(0.05, 0.2), sessions=(500, 2000), generator_shifts=(0.0, 1.0), replications=2,
                         paper_sessions=4000, paper_days=3, m=(1.0, 16.0, math.inf), exposure_samples=32)


PRESETS = {"smoke": _smoke(), "default": RegimesConfig()}


# ---- cells and setup -----------------------------------------------------------------------------

def grid(config: RegimesConfig, name: str) -> tuple[tuple, tuple]:
    """The (x values, y values) of a map."""
    x, y = MAPS[name]
    return getattr(config, DIALS[x][0]), getattr(config, DIALS[y][0])


def cells(config: RegimesConfig) -> list[dict]:
    out = []
    for name in config.maps:
        xs, ys = grid(config, name)
        out += [{"map": name, "x": float(x), "y": float(y), "replication": r}
                for x in xs for y in ys for r in range(config.replications)]
    if config.paper_sessions:
        out += [{"map": PAPER, "x": float(config.paper_sessions), "y": 0.0, "replication": r}
                for r in range(config.paper_replications)]
    return out


def cell_dials(config: RegimesConfig, cell: dict) -> Dials:
    """The dials of a cell: config.dials with the map's two dials set (the temperature dial
    switches to the Plackett–Luce logger); the paper cell changes log_sessions only."""
    if cell["map"] == PAPER:
        return dataclasses.replace(config.dials, log_sessions=int(cell["x"]))
    x, y = MAPS[cell["map"]]
    values = {x: cell["x"], y: cell["y"]}
    if "log_sessions" in values:
        values["log_sessions"] = int(values["log_sessions"])
    return dataclasses.replace(config.dials, **values)


@dataclass(frozen=True, eq=False)
class Shared:
    """The run's platform (`scenarios.platform`, replication 0, r0 and rt trained)."""
    platform: S.Platform


def setup(key, config: RegimesConfig) -> Shared:
    """Build (and train) the platform once per run; `key` is the run's root key."""
    return Shared(S.platform(key, config.scenario, 0, (S.Trained("r0"), S.Trained("rt"))))


# ---- one regime ------------------------------------------------------------------------------------

def regime_config(scenario: S.ScenarioConfig, dials: Dials) -> S.ScenarioConfig:
    """The scenario of a regime: level1's epsilon, the drift (session = global_drift · sqrt(share),
    engagement = global_drift · sqrt(1 − share), the two walks) and the log size from the dials."""
    drift = dataclasses.replace(scenario.drift, session=dials.global_drift * math.sqrt(dials.session_share),
                                engagement=dials.global_drift * math.sqrt(1.0 - dials.session_share),
                                item_walk=dials.item_walk, view_walk=dials.view_walk)
    return dataclasses.replace(scenario, drift=drift, log_sessions=dials.log_sessions,
                               level1=dataclasses.replace(scenario.level1, epsilon=dials.epsilon))


def _standardised(table: np.ndarray) -> np.ndarray:
    """Each row minus its mean over its standard deviation (f32[U, A]; a constant row -> 0)."""
    table = np.asarray(table, np.float64)
    sd = table.std(axis=1, keepdims=True)
    return ((table - table.mean(axis=1, keepdims=True)) / np.where(sd > 0, sd, 1.0)).astype(np.float32)


def shifted_generator(platform: S.Platform, target_scores: feed.ItemFn, shift: float) -> feed.FixedCandidates:
    """G′: the top N per user of (1 − shift)·z(retrieval) + shift·z(target scores) (z: standardised
    per user); shift 0 returns the platform's G itself."""
    if shift == 0:
        return platform.candidates[LEVEL]
    blend = ((1.0 - shift) * _standardised(S.retrieval_scores(platform).params)
             + shift * _standardised(target_scores.params))
    n = S.level_config(platform.config, LEVEL).candidates
    return feed.top_k_candidates(feed.from_table(blend), n, platform.world.n_users)


def logger_policy(platform: S.Platform, r0: feed.ItemFn, dials: Dials) -> feed.Policy:
    """R₀: ε-greedy around Sort(r0) on G (temperature 0, `scenarios.logging_policy`), or
    Plackett–Luce over per-user standardised r0 scores at the dial's temperature on G."""
    if dials.temperature == 0:
        return S.logging_policy(platform, LEVEL, r0)
    ranker = feed.PlackettLuce(feed.from_table(_standardised(r0.params)), jnp.float32(dials.temperature))
    return feed.Policy(platform.candidates[LEVEL], ranker, S.level_config(platform.config, LEVEL).feed_length)


@functools.partial(jax.jit, static_argnames=("feed_length", "num_samples"))
def _placement(key, logits, feed_length: int, num_samples: int):
    def sample(k):
        order = jnp.argsort(-(logits + jax.random.gumbel(k, logits.shape)), axis=1)            # [X, N]
        position = jnp.argsort(order, axis=1)
        ordered = jnp.take_along_axis(logits, order, axis=1)
        log_rest = jax.lax.cumlogsumexp(ordered[:, ::-1], axis=1)[:, ::-1][:, :feed_length]     # log Z_i
        available = position[:, :, None] >= jnp.arange(feed_length)[None, None, :]
        return jnp.where(available, jnp.exp(logits[:, :, None] - log_rest[:, None, :]), 0.0)

    total = jax.lax.fori_loop(0, num_samples, lambda r, acc: acc + sample(jax.random.fold_in(key, r)),
                              jnp.zeros((*logits.shape, feed_length)))
    return total / num_samples


def placement(key, policy: feed.Policy, num_contexts: int, num_samples: int) -> jax.Array:
    """P̂(a at rank i | x) of a Plackett–Luce policy on fixed candidates, for each context's
    candidates and every shown rank: the mean over `num_samples` sampled rankings σ of the
    conditional placement probability  1[a not in σ_1..σ_{i−1}] · w_a / Z_i,  w = exp(score / T),
    Z_i = the sum of w over the candidates not yet placed — unbiased for P(a at rank i) and positive
    at rank 1 for every candidate (Oosterhuis, SIGIR'21, PL-Rank's estimator with the view model
    factored out, so that one set of samples serves every day's view model). f32[X, N, K]."""
    if not isinstance(policy.ranker, feed.PlackettLuce) or not isinstance(policy.generator, feed.FixedCandidates):
        raise ValueError("placement needs a Plackett–Luce ranker on fixed candidates")
    contexts = jnp.arange(num_contexts, dtype=jnp.int32)
    candidates = feed.sample_candidates(None, policy.generator, contexts)
    logits = feed.item_values(policy.ranker.scores, contexts, candidates) / policy.ranker.temperature
    return _placement(key, logits, policy.feed_length, num_samples)


@functools.partial(jax.jit, static_argnames=("num_items",))
def _placement_table(placement_, candidates, survival, num_items: int):
    values = jnp.einsum("xnk,k->xn", placement_, survival)
    rows = jnp.arange(candidates.shape[0])[:, None]
    return jnp.zeros((candidates.shape[0], num_items), jnp.float32).at[rows, candidates].set(values)


def exposure_table(policy: feed.Policy, view, num_contexts: int, placement_=None) -> jax.Array:
    """ε(x, a) f32[X, A] under `view` (KDD'24 Eq. 6): exact (`feed.exposure`) for Sort and
    ε-greedy rankers, Σ_i P̂(a at i | x) S(i) from `placement` for the Plackett–Luce logger."""
    if placement_ is None:
        return feed.exposure(None, policy, view, np.arange(num_contexts)).mean
    candidates = feed.sample_candidates(None, policy.generator, jnp.arange(num_contexts, dtype=jnp.int32))
    survival = feed.view_probability(view, policy.feed_length)
    return _placement_table(placement_, candidates, survival, feed.num_items(policy))


@jax.jit
def _table_value(quality, activity, table):
    return jnp.einsum("sxa,xa,x->s", quality, table, activity)


def table_value(scenario: feed.Scenario, table) -> np.ndarray:
    """Online reward per session and signal of a policy with exposure table ε f32[X, A] under the
    scenario's view model, without within-session violations: Σ_x p(x) Σ_a q_s(x, a) ε(x, a)
    (`feed.online_value`'s value for an exact policy).  f64[S]."""
    quality = jnp.stack([q.params for q in scenario.quality])
    return np.asarray(_table_value(quality, scenario.activity, table), np.float64)


def difference_moments(rewards, logging_exposure, target_exposures: dict, viewed, m, block: int = BLOCK) -> dict:
    """Mean and standard error over trajectories of Δ_τ(m) = DCG_τ(ε; m) − DCG_τ(ε₀; m)
    (`ope.trajectory_dcg`, clipped IPS with a target's and the logger's own exposures) for every
    target and m, accumulated over blocks of `block` sessions so memory stays O(block · M).
    rewards, logging_exposure: [N, K]; target_exposures: {name: f32[N, K]}; viewed: bool[N, K];
    m: f[M]. Returns {name: (mean f64[M], se f64[M])}."""
    m = np.asarray(m, np.float64)
    n = viewed.shape[0]
    total = {name: np.zeros(m.size) for name in target_exposures}
    squares = {name: np.zeros(m.size) for name in target_exposures}
    shift = {}
    for start in range(0, n, block):
        part = slice(start, start + block)
        args = (rewards[part], logging_exposure[part])
        base = np.asarray(ope.trajectory_dcg(*args, logging_exposure[part], viewed[part], m), np.float64)
        for name, exposure in target_exposures.items():
            delta = np.asarray(ope.trajectory_dcg(*args, exposure[part], viewed[part], m), np.float64) - base
            centre = shift.setdefault(name, delta.mean(axis=1))         # centring keeps the sums exact
            centred = delta - centre[:, None]
            total[name] += centred.sum(axis=1)
            squares[name] += (centred * centred).sum(axis=1)
    out = {}
    for name in target_exposures:
        mean = total[name] / n
        variance = np.maximum(squares[name] - n * mean * mean, 0.0) / (n - 1)
        out[name] = (shift[name] + mean, np.sqrt(variance / n))
    return out


def _day_records(key, platform: S.Platform, config: RegimesConfig, dials: Dials, policies: dict, log_tables: dict,
                 placement_, d: int) -> list[dict]:
    """Records of one day of a regime (`COLUMNS` less map, x, y, replication). policies: {"R0":
    R₀, label: target}; log_tables: their exposure tables under the log discount (the same every
    day); placement_: the Plackett–Luce logger's `placement` (None for ε-greedy); the platform
    carries the regime's scenario config."""
    lv = S.level_config(platform.config, LEVEL)
    n_users = platform.world.n_users
    today = S.day(platform, LEVEL, d)
    scenario = today.scenario

    def tables(view) -> dict:
        return {name: exposure_table(p, view, n_users, placement_ if name == "R0" else None)
                for name, p in policies.items()}

    true = tables(scenario.view)
    log = feed.simulate(key, scenario, policies["R0"], dials.log_sessions, day=d, logging_exposure=true["R0"])
    viewed = log.viewed
    online = {name: table_value(scenario, table) for name, table in true.items()}
    logged = np.asarray(log.logging_exposure)[np.asarray(viewed)]
    log_length = dials.global_drift * math.sqrt(dials.session_share) * today.session + (
        dials.view_walk * float(S.walk(platform, "view", d)[0]) if dials.view_walk > 0 else 0.0)
    out = [{"signal": "", "target": "", "quantity": q, "m": math.nan, "value": float(v)}
           for q, v in zip(DAY_QUANTITIES, (log_length, today.engagement,
                                            float(np.mean(np.sum(np.asarray(viewed), axis=1))),
                                            float(1.0 / logged.min())))]
    pbm = feed.fit_view_model(viewed)
    exposures = {view: {name: ope.logged_exposures(log, table) for name, table in by.items()}
                 for view, by in (("log", log_tables), ("pbm", tables(pbm)))}
    discount = feed.view_probability(pbm, lv.feed_length)
    m = np.asarray(config.m, np.float64)
    for s, signal in enumerate(scenario.signals):
        rewards = log.rewards[s]
        out += [{"signal": signal, "target": name, "quantity": "online", "m": math.nan, "value": float(v[s])}
                for name, v in online.items()]
        values = {}
        for view in exposures:
            e0, e = exposures[view]["R0"], exposures[view][TARGET]
            est = ope.dcg_sweep(rewards, e0, e, viewed, np.array([1.0, math.inf]))
            values[f"dcg_{view}_c"] = (est.value[0], est.standard_error[0])
            values[f"dcg_{view}_q"] = (est.value[1], est.standard_error[1])
        e0, e = exposures["pbm"]["R0"], exposures["pbm"][TARGET]
        idcg = ope.ideal_dcg(rewards, e0, viewed, discount, math.inf)
        for zero in ("skip", "zero"):
            per = ope.trajectory_ndcg(rewards, e0, e, viewed, discount, math.inf, zero_ideal=zero, idcg=idcg)
            est = ope.mean_estimate(per)
            values[f"ndcg_{zero}"] = (est.value, est.standard_error)
        for q in CORRELATED:
            out += [{"signal": signal, "target": TARGET, "quantity": q, "m": math.nan, "value": float(values[q][0])},
                    {"signal": signal, "target": TARGET, "quantity": f"se[{q}]", "m": math.nan,
                     "value": float(values[q][1])}]
        moments = difference_moments(rewards, e0, {name: e for name, e in exposures["pbm"].items() if name != "R0"},
                                     viewed, m)
        for name, (mean, se) in moments.items():
            out += [{"signal": signal, "target": name, "quantity": q, "m": float(mv), "value": float(v)}
                    for q, vals in (("delta", mean), ("delta_se", se)) for mv, v in zip(m, vals)]
    return out


def compute(key, config: RegimesConfig, cell: dict, shared: Shared) -> list[dict]:
    """Records of one cell: its regime's `days` days. `key` is the run's root key; day t of
    replication r draws from fold_in(shared_key(key, "replication:r"), t) at every grid point."""
    dials = cell_dials(config, cell)
    platform = dataclasses.replace(shared.platform, config=regime_config(config.scenario, dials))
    r0 = S.scores(platform, S.Trained("r0"))
    rankers = {S.ranker_label(r): S.scores(platform, r) for r in config.improving + config.harmful}
    generator = shifted_generator(platform, rankers[TARGET], dials.generator_shift)
    feed_length = S.level_config(platform.config, LEVEL).feed_length
    policies = {"R0": logger_policy(platform, r0, dials),
                **{name: feed.Policy(generator, feed.Sort(scores), feed_length) for name, scores in rankers.items()}}
    base = shared_key(key, f"replication:{cell['replication']}")
    n_users = platform.world.n_users
    placement_ = None if dials.temperature == 0 else placement(shared_key(key, "placement"), policies["R0"], n_users,
                                                               config.exposure_samples)
    log_tables = {name: exposure_table(p, feed.Logarithmic(), n_users, placement_ if name == "R0" else None)
                  for name, p in policies.items()}
    activity = np.asarray(jax.nn.softmax(platform.world.user_log_activity), np.float64)     # the base user mix
    head = {"map": cell["map"], "x": cell["x"], "y": cell["y"], "replication": cell["replication"]}
    out = [{**head, "day": -1, "signal": "", "target": name, "quantity": "lost", "m": math.nan,
            "value": float(np.asarray(ope.support_loss(log_tables["R0"], table), np.float64) @ activity)}
           for name, table in log_tables.items() if name != "R0"]
    days = config.paper_days if cell["map"] == PAPER else config.scenario.days
    for t in range(days):
        d = cell["replication"] * days + t
        records = _day_records(jax.random.fold_in(base, t), platform, config, dials, policies, log_tables, placement_,
                               d)
        out += [{**head, "day": d, **record} for record in records]
    return out


# ---- report ----------------------------------------------------------------------------------------

CELL = ["map", "x", "y"]
MARKS = {"holds": "✓", "fails": "✗", "tie": "~", "unclear": "~", "partly": "◐"}
#: the paired comparisons in r of (b) and (c): verdict -> (better estimator, worse estimator)
PAIRED = {"b": ("dcg_pbm_q", "ndcg_skip"), "c": ("dcg_pbm_q", "dcg_log_c")}


def _label(name: str, axis: str) -> str:
    """The dial name of a map's axis ("x" or "y")."""
    if name == PAPER:
        return "log_sessions" if axis == "x" else ""
    return MAPS[name][0 if axis == "x" else 1]


def daily_frame(records: pd.DataFrame) -> pd.DataFrame:
    """One row per (map, x, y, replication, day, signal): the exact online reward of rt
    (``online``) and R₀ (``online_R0``), rt's estimates (`CORRELATED`) and their SEs."""
    keys = [*CELL, "replication", "day", "signal"]
    part = records[(records.signal != "") & records.m.isna()
                   & ((records.target == TARGET) | ((records.target == "R0") & (records.quantity == "online")))]
    part = part.assign(column=np.where(part.target == "R0", "online_R0", part.quantity))
    wide = part.pivot_table(index=keys, columns="column", values="value", sort=False).reset_index()
    wide.columns.name = None
    return wide


def correlations(daily: pd.DataFrame) -> pd.DataFrame:
    """Pearson r (`stats.pearson`) of each estimator's daily series with rt's exact online reward,
    per (map, x, y, replication, signal); NaN where a series is constant."""
    rows = []
    for key, group in daily.groupby([*CELL, "replication", "signal"], sort=False):
        group = group.sort_values("day")
        online = group.online.to_numpy()
        for estimator in CORRELATED:
            values = group[estimator].to_numpy()
            ok = np.ptp(values) > 0 and np.ptp(online) > 0 and np.all(np.isfinite(values))
            rows.append({**dict(zip([*CELL, "replication", "signal"], key)), "estimator": estimator,
                         "r": float(stats.pearson(values, online)[0]) if ok else math.nan})
    return pd.DataFrame(rows)


def _mean_se(values: np.ndarray) -> tuple[float, float]:
    values = values[np.isfinite(values)]
    if values.size == 0:
        return math.nan, math.nan
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(values.size)) if values.size > 1 else math.nan


def _paired(diff: np.ndarray) -> tuple[float, float, str]:
    """Mean, SE and verdict of paired differences: holds beyond +2 SE, fails below −2 SE, else tie
    (unclear without an SE)."""
    mean, se = _mean_se(diff)
    if not math.isfinite(se):
        return mean, se, "unclear"
    return mean, se, "holds" if mean > 2 * se else "fails" if mean < -2 * se else "tie"


def verdicts(corr: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The verdicts (a)–(c) per (map, x, y, signal) over replications (module docstring)."""
    wide = corr.set_index([*CELL, "signal", "replication", "estimator"]).r.unstack("estimator").reset_index()
    out = {"a": [], "b": [], "c": []}
    for key, group in wide.groupby([*CELL, "signal"], sort=False):
        base = dict(zip([*CELL, "signal"], key))
        base = {"map": base["map"], "x_dial": _label(base["map"], "x"), "x": base["x"],
                "y_dial": _label(base["map"], "y"), "y": base["y"], "signal": base["signal"],
                "replications": len(group)}
        mean, se = _mean_se(group.dcg_pbm_q.to_numpy())
        verdict = ("unclear" if not math.isfinite(se) else
                   "holds" if mean >= 0.5 and mean - 2 * se > 0 else "fails" if mean + 2 * se < 0.5 else "unclear")
        out["a"].append({**base, "statistic": "mean r DCG (pbm, Q̂)", "value": mean, "se": se, "verdict": verdict})
        for name, (better, worse) in PAIRED.items():
            diff, se_diff, verdict = _paired(group[better].to_numpy() - group[worse].to_numpy())
            row = {**base, "statistic": f"r {ESTIMATORS[better]} − r {ESTIMATORS[worse]}", "value": diff,
                   "se": se_diff, "verdict": verdict}
            for estimator in (better, worse):
                row[f"r {ESTIMATORS[estimator]}"] = _mean_se(group[estimator].to_numpy())[0]
            if name == "b":
                r_ndcg, se_ndcg = _mean_se(group[worse].to_numpy())
                row["nDCG opposite sign"] = bool(math.isfinite(se_ndcg) and r_ndcg + 2 * se_ndcg < 0)
            if name == "c":
                for other in ("dcg_log_q", "dcg_pbm_c"):
                    d, s, v = _paired(group[better].to_numpy() - group[other].to_numpy())
                    row.update({f"vs {ESTIMATORS[other]}": d, f"vs {ESTIMATORS[other]} SE": s,
                                f"vs {ESTIMATORS[other]} verdict": v})
            out[name].append(row)
    return {name: pd.DataFrame(rows) for name, rows in out.items()}


def settings_frame(config: RegimesConfig, records: pd.DataFrame) -> pd.DataFrame:
    """One row per (cell, replication, day, signal, target, m) of (d): the exact online difference
    V(R_t) − V(R₀), whether the target truly improves (> 0) or harms (< 0), and the estimated mean
    difference, its SE and whether its `confidence` normal CI lies above 0."""
    keys = [*CELL, "replication", "day", "signal"]
    online = records[records.quantity == "online"].rename(columns={"value": "online"})[[*keys, "target", "online"]]
    base = online[online.target == "R0"].drop(columns="target").rename(columns={"online": "online_R0"})
    online = online[online.target != "R0"].merge(base, on=keys)
    delta = records[records.quantity.isin(["delta", "delta_se"])].pivot_table(
        index=[*keys, "target", "m"], columns="quantity", values="value", sort=False).reset_index()
    frame = delta.merge(online, on=[*keys, "target"])
    frame["exact_diff"] = frame.online - frame.online_R0
    frame["improving"] = frame.exact_diff > 0
    frame["harmful"] = frame.exact_diff < 0
    z = float(scipy_stats.norm.ppf((1 + config.confidence) / 2))
    frame["detected"] = frame.delta - z * frame.delta_se > 0
    frame.columns.name = None
    return frame


def detection(config: RegimesConfig, frame: pd.DataFrame) -> pd.DataFrame:
    """TPR and FPR (with Wilson 95 % intervals) and sign agreement per (map, x, y, m)."""
    from statsmodels.stats.proportion import proportion_confint
    rows = []
    for key, group in frame.groupby([*CELL, "m"], sort=False):
        row = dict(zip([*CELL, "m"], key))
        for kind, rate in (("improving", "TPR"), ("harmful", "FPR")):
            part = group[group[kind]]
            count, n = int(part.detected.sum()), len(part)
            low, high = proportion_confint(count, n, alpha=0.05, method="wilson") if n else (math.nan, math.nan)
            row.update({f"n_{kind}": n, rate: count / n if n else math.nan, f"{rate}_low": low, f"{rate}_high": high})
        improving = group[group.improving]
        row["sign_agreement"] = float((improving.delta > 0).mean()) if len(improving) else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def verdict_d(frame: pd.DataFrame, rates: pd.DataFrame) -> pd.DataFrame:
    """Verdict (d) per (map, x, y): the best m (highest TPR, the smallest such m), its TPR and FPR,
    and its paired gain in detections over m = ∞ on the same improving settings (module docstring)."""
    rows = []
    for key, group in rates.groupby(CELL, sort=False):
        name, x, y = key
        group = group.sort_values("m")
        best = group.loc[group.TPR.idxmax()] if group.TPR.notna().any() else group.iloc[-1]
        settings = frame[(frame["map"] == name) & (frame.x == x) & (frame.y == y) & frame.improving]
        wide = settings.pivot_table(index=["replication", "day", "signal", "target"], columns="m", values="detected")
        gain, gain_se = math.nan, math.nan
        if math.inf in wide.columns and len(wide) > 1:
            gain, gain_se = _mean_se((wide[best.m] - wide[math.inf]).to_numpy(np.float64))
        few_false = best.n_harmful == 0 or best.FPR <= 0.05        # no harmful setting: nothing to contradict
        detects = bool(math.isfinite(best.TPR) and best.TPR >= 0.5 and few_false)
        moderate = bool(math.isfinite(best.m) and math.isfinite(gain_se) and gain > 2 * gain_se)
        verdict = "holds" if detects and moderate else "partly" if detects else "fails"
        inf_row = group[group.m == math.inf]
        rows.append({"map": name, "x_dial": _label(name, "x"), "x": x, "y_dial": _label(name, "y"), "y": y,
                     "best m": best.m, "TPR": best.TPR, "TPR_low": best.TPR_low, "TPR_high": best.TPR_high,
                     "FPR": best.FPR, "FPR_high": best.FPR_high,
                     "TPR m=1": float(group[group.m == 1.0].TPR.iloc[0]) if (group.m == 1.0).any() else math.nan,
                     "TPR m=∞": float(inf_row.TPR.iloc[0]) if len(inf_row) else math.nan,
                     "gain over m=∞": gain, "gain SE": gain_se, "n_improving": int(best.n_improving),
                     "n_harmful": int(best.n_harmful), "verdict": verdict})
    return pd.DataFrame(rows)


def mechanism(records: pd.DataFrame, daily: pd.DataFrame) -> pd.DataFrame:
    """Per (map, x, y): the largest importance weight 1/ε₀ of a day's log (mean over days), rt's
    exposure lost outside R₀'s support, and per signal the noise ceiling sqrt(1 − mean SE² /
    Var over days) that one day's standard error puts on the r of DCG (pbm, Q̂) and DCG (log, C)."""
    day = records[(records.signal == "") & (records.target == "")]
    weights = day[day.quantity == "max_weight"].groupby(CELL, sort=False).value.mean().rename("max weight 1/ε₀")
    lost = records[(records.quantity == "lost") & (records.target == TARGET)].groupby(CELL, sort=False).value.mean()
    out = pd.concat([weights, lost.rename("rt exposure outside R₀'s support")], axis=1).reset_index()
    rows = []
    for key, group in daily.groupby([*CELL, "signal"], sort=False):
        row = dict(zip([*CELL, "signal"], key))
        row["sd of online reward over days"] = float(group.groupby("replication").online.std(ddof=1).mean())
        for estimator in ("dcg_pbm_q", "dcg_log_c"):
            variance = group.groupby("replication")[estimator].var(ddof=1).mean()
            se2 = float(np.mean(group[f"se[{estimator}]"] ** 2))
            row[f"ceiling {ESTIMATORS[estimator]}"] = (math.sqrt(max(0.0, 1.0 - se2 / variance)) if variance > 0
                                                       else math.nan)
        rows.append(row)
    per_signal = pd.DataFrame(rows).pivot_table(index=CELL, columns="signal", sort=False)
    per_signal.columns = [f"{value} [{signal}]" for value, signal in per_signal.columns]
    return out.merge(per_signal.reset_index(), on=CELL, how="left")


def _fmt(value: float) -> str:
    if not math.isfinite(value):
        return "∞" if value == math.inf else "–"
    return f"{value:g}" if value >= 1000 else f"{value:.3g}"


def _heatmaps(config: RegimesConfig, table: pd.DataFrame, value: str, title: str, *, rows: str | None = "signal",
              vmin: float = -1.0, vmax: float = 1.0, extra: tuple[str, str] | None = None):
    """One heatmap per map (columns) and per `rows` value (rows): `value` as colour and number,
    the verdict as a mark (✓ holds, ✗ fails, ~ tie / unclear, ◐ partly), and `extra` = (column,
    short label) under it."""
    import matplotlib.pyplot as plt
    maps = [name for name in config.maps if name in set(table["map"])]
    row_values = list(dict.fromkeys(table[rows])) if rows else [None]
    fig, axes = plt.subplots(len(row_values), len(maps), figsize=(3.3 * len(maps), 2.9 * len(row_values)),
                             squeeze=False)
    for i, row_value in enumerate(row_values):
        for j, name in enumerate(maps):
            ax = axes[i, j]
            part = table[(table["map"] == name) & ((table[rows] == row_value) if rows else True)]
            xs, ys = sorted(set(part.x)), sorted(set(part.y))
            grid_ = np.full((len(ys), len(xs)), np.nan)
            for _, r in part.iterrows():
                grid_[ys.index(r.y), xs.index(r.x)] = r[value]
            ax.imshow(grid_, origin="lower", cmap="RdBu" if vmin < 0 else "viridis", vmin=vmin, vmax=vmax,
                      aspect="auto")
            for _, r in part.iterrows():
                text = f"{_fmt(r[value])} {MARKS.get(r.verdict, '')}"
                if extra:
                    text += f"\n{extra[1]} {_fmt(r[extra[0]])}"
                ax.text(xs.index(r.x), ys.index(r.y), text, ha="center", va="center", fontsize=7.5,
                        color="black", bbox=dict(boxstyle="round,pad=0.15", fc="white", alpha=0.6, lw=0))
            ax.set_xticks(range(len(xs)), [_fmt(v) for v in xs])
            ax.set_yticks(range(len(ys)), [_fmt(v) for v in ys])
            ax.set_xlabel(DIALS[MAPS[name][0]][1], fontsize=8)
            ax.set_ylabel(DIALS[MAPS[name][1]][1], fontsize=8)
            ax.set_title(f"{name}" + (f" · {row_value}" if rows else ""), fontsize=9)
    fig.suptitle(title + "   (✓ holds, ✗ fails, ~ tie or unclear, ◐ partly)", fontsize=10)
    fig.tight_layout()
    return fig


def _where(table: pd.DataFrame, verdict: str) -> str:
    """The grid points of `table` (one map, one signal) with `verdict`, as "(x, y)" pairs."""
    part = table[table.verdict == verdict]
    return ", ".join(f"({_fmt(x)}, {_fmt(y)})" for x, y in zip(part.x, part.y)) or "none"


def _regions(config: RegimesConfig, table: pd.DataFrame, by_signal: bool = True) -> list[str]:
    """One line per map (and signal): the count and grid points of each verdict."""
    lines = []
    for name in config.maps:
        x, y = MAPS[name]
        for signal in (dict.fromkeys(table.signal) if by_signal else [None]):
            part = table[(table["map"] == name) & ((table.signal == signal) if by_signal else True)]
            if part.empty:
                continue
            counts = part.verdict.value_counts()
            text = "; ".join(f"{verdict} {counts[verdict]}/{len(part)}" + (
                f" at {_where(part, verdict)}" if verdict in ("holds", "fails") else "")
                for verdict in ("holds", "partly", "tie", "unclear", "fails") if verdict in counts)
            lines.append(f"  - `{name}` ({x} × {y}{', ' + signal if signal else ''}): {text}")
    return lines


def _paper_text(tables: dict, paper: pd.DataFrame) -> str:
    if paper.empty:
        return ""
    parts = []
    for name, table in tables.items():
        part = table[table["map"] == PAPER]
        if part.empty:
            continue
        if name == "d":
            row = part.iloc[0]
            parts.append(f"(d) best m = {_fmt(row['best m'])}, TPR {row.TPR:.2f}, FPR {row.FPR:.2f}, "
                         f"TPR at m = 1 {row['TPR m=1']:.2f} and at m = ∞ {row['TPR m=∞']:.2f}: {row.verdict}")
        else:
            parts.append(f"({name}) " + ", ".join(f"{r.signal} {r.value:+.2f} ± {_fmt(r.se)}: {r.verdict}"
                                                   for r in part.itertuples()))
    return "; ".join(parts)


def _trend(table: pd.DataFrame, name: str, axis: str, column: str, fmt: str = "+.2f") -> str:
    """`column` averaged over everything but one axis of map `name`: "v₁ → v₂ → …" along it, with
    the axis values, or "" when the map was not computed."""
    part = table[(table["map"] == name)]
    if part.empty or column not in part:
        return ""
    means = part.groupby(axis)[column].mean()
    dial = MAPS[name][0 if axis == "x" else 1]
    return f"{dial} " + " → ".join(f"{_fmt(k)}: {format(v, fmt)}" for k, v in means.items())


def _reading(every: dict, mech: pd.DataFrame) -> list[str]:
    """The mechanism paragraphs: each verdict's statistic along the dials that move it."""
    a, b, c, d = every["a"], every["b"], every["c"], every["d"]
    nd = "r nDCG (pbm, Q̂), iDCG=0 skipped"
    lc = "r DCG (log, C)"
    ceiling = mech.melt(id_vars=CELL, value_vars=[col for col in mech if col.startswith("ceiling DCG (pbm, Q̂)")],
                        value_name="ceiling")
    lines = ["**Reading the maps** (each statistic averaged over the other dial and the signals):", ""]
    lines.append(
        f"- (a) noise: along the log size the mean r of DCG (pbm, Q̂) is {_trend(a, 'exploration', 'y', 'value')}, "
        f"and the ceiling that one day's standard error puts on r (sqrt(1 − SE²/Var over days)) is "
        f"{_trend(ceiling, 'exploration', 'y', 'ceiling', '.2f')}; along exploration, "
        f"{_trend(a, 'exploration', 'x', 'value')} (rarer exploration: larger weights 1/ε₀, noisier days); "
        f"with the Plackett–Luce logger, {_trend(a, 'plackett_luce', 'x', 'value')}; along the target's generator "
        f"shift, {_trend(a, 'generator', 'x', 'value')} (the target's exposure outside R₀'s support, "
        f"{_trend(mech, 'generator', 'x', 'rt exposure outside R₀' + chr(39) + 's support', '.2f')}, "
        "is invisible to every estimator on R₀'s log, and its day-to-day movement with it).")
    lines.append(
        f"- (b) the sign of nDCG: its mean r along the session-length share of the global drift is "
        f"{_trend(b, 'drift', 'x', nd)} (drift map) and {_trend(b, 'examination', 'y', nd)} (examination map); "
        f"along the item walk {_trend(b, 'drift', 'y', nd)}. Days that differ in engagement move online reward "
        "but leave the per-session ratio nDCG nearly unchanged (labels scale in numerator and ideal); days that "
        "differ in session length move both.")
    lines.append(
        f"- (c) log, C vs pbm, Q̂: the mean r of DCG (log, C) along the view walk is "
        f"{_trend(c, 'examination', 'x', lc)} against {_trend(c, 'examination', 'x', 'r DCG (pbm, Q̂)')} for "
        f"DCG (pbm, Q̂); along the log size, {_trend(c, 'exploration', 'y', lc)} against "
        f"{_trend(c, 'exploration', 'y', 'r DCG (pbm, Q̂)')}. Raw labels carry no importance weights, so their "
        "daily series is the less noisy one, and a fixed discount's error is nearly a constant factor from day "
        "to day (the logger's clicks follow the day's true examination, and the target's reward moves with "
        "them), which Pearson's r ignores; the unbiased estimator wins only once the log is large enough for "
        "its noise to fall below the drift it has to follow.")
    lines.append(
        f"- (d) detection: TPR at the best m along exploration {_trend(d, 'exploration', 'x', 'TPR', '.2f')}, "
        f"along the log size {_trend(d, 'exploration', 'y', 'TPR', '.2f')}, along the Plackett–Luce temperature "
        f"{_trend(d, 'plackett_luce', 'x', 'TPR', '.2f')} and along the generator shift "
        f"{_trend(d, 'generator', 'x', 'TPR', '.2f')}; the TPR at m = 1 (raw labels) is "
        f"{_trend(d, 'exploration', 'x', 'TPR m=1', '.2f')}. The best m is "
        + ", ".join(f"{_fmt(k)} at {v} grid points" for k, v in d["best m"].value_counts().sort_index().items())
        + f"; the largest FPR at the best m is {d.FPR.max():.2f}. A finite m beats m = ∞ beyond 2 SE at "
        f"{int((d['gain over m=∞'] > 2 * d['gain SE']).sum())} of {len(d)} grid points, "
        + (", ".join(f"({r.map}: {_fmt(r.x)}, {_fmt(r.y)}; TPR {r.TPR:.2f} at m = {_fmt(r._6)})"
                     for r in d[d["gain over m=∞"] > 2 * d["gain SE"]].itertuples()) or "none")
        + ": clipping pays where the weights 1/ε₀ are heavy (rare exploration), and there detection stays "
        "low; where no weight exceeds the largest finite m, it and m = ∞ are the same estimator. Raw labels "
        "(m = 1) detect where the logger already shows the target's items at the target's ranks often: TPR at "
        f"m = 1 along the Plackett–Luce temperature is {_trend(d, 'plackett_luce', 'x', 'TPR m=1', '.2f')}, "
        f"against {_trend(d, 'exploration', 'x', 'TPR m=1', '.2f')} under the ε-greedy logger, whose "
        "exploration is a uniform shuffle.")
    return lines


def report(config: RegimesConfig, records: pd.DataFrame) -> Report:
    import seaborn as sns
    sns.set_theme(style="white", context="paper")
    daily = daily_frame(records)
    corr = correlations(daily)
    tables_abc = verdicts(corr)
    frame = settings_frame(config, records)
    rates = detection(config, frame)
    table_d = verdict_d(frame, rates)
    mech = mechanism(records, daily)
    every = {**tables_abc, "d": table_d}
    grid_only = {name: t[t["map"] != PAPER] for name, t in every.items()}
    figures = {
        "fig_verdict_a": _heatmaps(config, grid_only["a"], "value", "(a) mean r of DCG (pbm, Q̂) with online reward"),
        "fig_verdict_b": _heatmaps(config, grid_only["b"], "value", "(b) r DCG (pbm, Q̂) − r nDCG (pbm, Q̂, skip)",
                                   vmin=-2, vmax=2, extra=("r nDCG (pbm, Q̂), iDCG=0 skipped", "nDCG r")),
        "fig_verdict_c": _heatmaps(config, grid_only["c"], "value", "(c) r DCG (pbm, Q̂) − r DCG (log, C)",
                                   vmin=-1, vmax=1, extra=("r DCG (log, C)", "log,C r")),
        "fig_verdict_d": _heatmaps(config, grid_only["d"], "TPR", "(d) TPR of clipped DCG at its best m",
                                   rows=None, vmin=0, vmax=1, extra=("best m", "m")),
    }
    paper = pd.concat([t[t["map"] == PAPER].assign(verdict_of=name) for name, t in every.items()], ignore_index=True)
    tables = {"table_verdict_a": every["a"], "table_verdict_b": every["b"], "table_verdict_c": every["c"],
              "table_verdict_d": every["d"], "table_detection": rates, "table_correlation": corr,
              "table_mechanism": mech, "table_paper_cell": paper}
    return Report(tables=tables, figures=figures, summary=_summary(config, every, rates, mech, paper),
                  float_format=".3g")


def _summary(config: RegimesConfig, every: dict, rates: pd.DataFrame, mech: pd.DataFrame, paper: pd.DataFrame) -> str:
    sc, dials = config.scenario, config.dials
    maps = ", ".join(f"`{name}` ({MAPS[name][0]} × {MAPS[name][1]})" for name in config.maps)
    lines = [
        f"Platform {sc.world.n_users} users × {sc.world.n_items} items (smaller than `correlation`'s 2,000 × "
        f"1,000, so that a cell takes seconds), one feed level (scroll-budget view, N = {sc.level1.candidates} "
        f"candidates, K = {sc.level1.feed_length} shown, no violations of Asm. 1–4). Maps: {maps}; each grid point "
        f"runs {config.replications} replications × {sc.days} days (disjoint days, the same random numbers at "
        f"every grid point). Dials elsewhere: ε = {dials.epsilon:g} (ε-greedy logger), {dials.log_sessions:,} "
        f"logged sessions a day, global drift sd {dials.global_drift:g} with session-length share "
        f"{dials.session_share:g}, item walk {dials.item_walk:g}, view walk {dials.view_walk:g}, generator shift "
        f"{dials.generator_shift:g}. Correlations are against rt's exact online reward (the paper's A/B means over "
        f"40M users are exact to its precision). Figures `fig_verdict_*`: one heatmap per map (and signal), the "
        f"statistic in colour and number, the verdict as a mark; tables `table_verdict_*` hold the same numbers "
        f"with standard errors over replications, `table_detection` TPR/FPR with Wilson intervals for every m, "
        f"`table_correlation` every r, `table_mechanism` weights, support loss and noise ceilings.",
        "",
        "**In short** (over every grid point of every map"
        ", signals separately for (a)–(c)): "
        + "; ".join(f"({name}) " + ", ".join(f"{verdict} {count}" for verdict, count in
                                             every[name][every[name]["map"] != PAPER].verdict.value_counts().items())
                    for name in "abcd") + ".",
        "",
        "**Verdict maps** (grid points as (x, y); verdicts beyond 2 SE over replications, module docstring):",
        "",
        "- (a) *DCG (pbm, Q̂) tracks online reward* (holds: mean r >= 0.5 and > 0 by 2 SE; fails: mean r + 2 SE < "
        "0.5):", *_regions(config, every["a"]),
        "- (b) *nDCG tracks it worse* (r of DCG (pbm, Q̂) − r of nDCG (pbm, Q̂, skip), paired):",
        *_regions(config, every["b"]),
        f"  nDCG's mean r is significantly negative (the paper's opposite sign) at "
        f"{int(every['b']['nDCG opposite sign'].sum())} of {len(every['b'])} (grid point, signal) pairs.",
        "- (c) *learnt pbm and Q̂ beat log and C* (r of DCG (pbm, Q̂) − r of DCG (log, C), paired):",
        *_regions(config, every["c"]),
        f"- (d) *clipped DCG detects improvements with few false positives, best at moderate m* (holds: TPR >= 0.5 "
        f"and FPR <= 0.05 (or no truly harmful setting) at the best m, a finite m beating m = ∞ by 2 SE; partly: "
        f"detection without the "
        f"moderate-m gain), pooled over signals, days, replications and targets "
        f"{', '.join(S.ranker_label(r) for r in config.improving)} (improving) and "
        f"{', '.join(S.ranker_label(r) for r in config.harmful)} (harmful); every setting's truth is the exact "
        f"online difference:", *_regions(config, every["d"], by_signal=False),
    ]
    lines += ["", *_reading(every, mech), "",
              "**Caveats and where the source differs.** The paper's regime is one production platform with "
              "40M users, two feed levels and violated assumptions; here one simulated level without violations "
              "(besides Asm. 5 when G′ ≠ G), a platform of "
              f"{sc.world.n_users} users, {config.replications} replications per grid point (a 2-SE rule over so few "
              "replications is a coarse filter: 'tie' and 'unclear' mean not established, not equal). Correlations "
              "use the exact online reward, not an A/B estimate. The Plackett–Luce logger's propensities are "
              f"estimated from {config.exposure_samples} sampled rankings per user (`placement`), which a "
              "production system would have to do as well; the ε-greedy logger's are exact. (d) pools the "
              "improving targets with the harmful one, so its TPR mixes small and large effects; its truth is the "
              "sign of the exact online difference, not a significant A/B test."]
    if not paper.empty:
        lines += ["", f"**Paper-like cell** ({config.paper_sessions:,} logged sessions a day, default dials, "
                      f"{config.paper_replications} replication(s); with one replication there is no SE, so (a)–(c) "
                      f"read 'unclear'): " + _paper_text(every, paper) + "."]
    return "\n".join(lines)


STUDY = Study(
    name="regimes",
    description="Verdict maps: where Jeunen et al.'s KDD'24 §6 conclusions (DCG tracks online reward, nDCG "
                "worse, pbm/Q̂ beat log/C, clipped DCG detects improvements) hold over exploration, log size, "
                "drift and candidate-generator regimes",
    presets=PRESETS, cells=cells, setup=setup, cache_setup=True, compute=compute, report=report,
    columns=COLUMNS, expected_seconds={"smoke": 150, "default": 560})
