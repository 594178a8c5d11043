"""The regimes study's computation: the regime of a cell (its dials), the logger (ε-greedy or
Plackett–Luce with estimated placement probabilities), the shifted candidate generator G′, the
exact online reward of every policy, and each day's records: the estimates correlated with online
reward and the moments of the per-trajectory differences Δ_τ(m) (the package docstring states the
design)."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

from simrec import feed, ope
from simrec.runner import shared_key
from simrec_studies.common import scenarios as S
from simrec_studies.common import table2_estimates

if TYPE_CHECKING:
    from simrec_studies.regimes import Dials, RegimesConfig

#: dial -> (the config field holding its grid values, its label in tables and figures)
DIALS = {
    "epsilon": ("epsilons", "logger ε (ε-greedy)"),
    "temperature": ("temperatures", "logger PL temperature"),
    "log_sessions": ("sessions", "logged sessions / day"),
    "session_share": ("session_shares", "session-length share of global drift"),
    "item_walk": ("item_walks", "item random-walk sd / day"),
    "view_walk": ("view_walks", "view random-walk sd / day"),
    "generator_shift": ("generator_shifts", "generator shift λ (G′ vs G)"),
    "global_drift": ("global_drifts", "global drift sd"),
    "watch_slope": ("watch_slopes", "watch's slope in the quality logit"),
    "watch_shift": ("watch_shifts", "watch's logit shift"),
}
#: map -> (x dial, y dial); a map with the temperature dial uses the Plackett–Luce logger
MAPS = {
    "exploration": ("epsilon", "log_sessions"),
    "plackett_luce": ("temperature", "item_walk"),
    "drift": ("session_share", "item_walk"),
    "examination": ("view_walk", "session_share"),
    "generator": ("generator_shift", "epsilon"),
    "engagement": ("global_drift", "session_share"),
    "signal": ("watch_slope", "watch_shift"),
}
#: dials a map holds at other values than `RegimesConfig.dials`: the engagement map has no item or
#: view walk, so that at session_share 0 the only drift is the global engagement factor; the signal
#: map sits at that engagement-only drift, at the engagement map's strongest default drift (1.28),
#: and moves the watch signal's slope and shift between watch's own (0.5, −1.5) and like's (1, −7)
MAP_DIALS = {"engagement": {"item_walk": 0.0, "view_walk": 0.0},
             "signal": {"item_walk": 0.0, "view_walk": 0.0, "global_drift": 1.28, "session_share": 0.0}}
PAPER = "paper"                      # the map name of the paper-like cell (default dials, 10^6 sessions)
CORRELATED = ("dcg_log_c", "dcg_log_q", "dcg_pbm_c", "dcg_pbm_q", "ndcg_skip", "ndcg_zero")
TARGET = "rt"                        # the target whose daily estimates are correlated (Table 2's R_t)
SERIES = (TARGET, "R0")              # the policies whose daily series are correlated (Table 2's R_t and R_0)
DAY_QUANTITIES = ("log_length", "engagement", "depth", "max_weight")
#: per signal, of the day's logged sessions with exactly one positive label (`one_click_quantities`):
#: their share of the sessions with one or more, their mean viewed depth, and the exposure under the
#: day's learnt pbm that R₀ and rt give the labelled item (rt's is those sessions' nDCG (pbm, Q̂))
ONE_CLICK = ("one_click_share", "one_click_depth", "one_click_logger_exposure", "one_click_target_exposure")


# ---- cells and setup -----------------------------------------------------------------------------

def grid(config: RegimesConfig, name: str) -> tuple[tuple, tuple]:
    """The (x values, y values) of a map."""
    x, y = MAPS[name]
    return getattr(config, DIALS[x][0]), getattr(config, DIALS[y][0])


def grid_points(config: RegimesConfig) -> list[dict]:
    """Every grid point {"map", "x", "y"} of the config's maps, in map and grid order, then the
    paper-like cell's point (when ``paper_sessions``)."""
    out = []
    for name in config.maps:
        xs, ys = grid(config, name)
        out += [{"map": name, "x": float(x), "y": float(y)} for x in xs for y in ys]
    if config.paper_sessions:
        out.append({"map": PAPER, "x": float(config.paper_sessions), "y": 0.0})
    return out


def cells(config: RegimesConfig) -> list[dict]:
    """One cell per distinct regime and replication: {"points": [[map, x, y], ...], "replication"}.
    Grid points of different maps whose dials coincide (the default regime lies on several maps)
    are one regime, computed once; its records are written for each of its points."""
    regimes: dict = {}
    for point in grid_points(config):
        regime = (point["map"] == PAPER, cell_dials(config, point))
        regimes.setdefault(regime, []).append([point["map"], point["x"], point["y"]])
    replications = lambda points: (config.paper_replications if points[0][0] == PAPER  # noqa: E731
                                   else config.replications)
    return [{"points": points, "replication": r} for points in regimes.values() for r in range(replications(points))]


def cell_points(cell: dict) -> list[dict]:
    """The grid points {"map", "x", "y"} a cell's records are written for."""
    return [{"map": name, "x": x, "y": y} for name, x, y in cell["points"]]


def cell_dials(config: RegimesConfig, point: dict) -> Dials:
    """The dials of a grid point {"map", "x", "y"}: config.dials with the map's `MAP_DIALS` and its
    two dials set (the temperature dial switches to the Plackett–Luce logger); the paper cell
    changes log_sessions only. A watch dial at the scenario's own value is None (the same regime
    as where no map sets it, so that it is computed once)."""
    if point["map"] == PAPER:
        return dataclasses.replace(config.dials, log_sessions=int(point["x"]))
    x, y = MAPS[point["map"]]
    values = {**MAP_DIALS.get(point["map"], {}), x: point["x"], y: point["y"]}
    if "log_sessions" in values:
        values["log_sessions"] = int(values["log_sessions"])
    for name in ("watch_slope", "watch_shift"):
        if values.get(name) == getattr(config.scenario.signals, name):
            values[name] = None
    return dataclasses.replace(config.dials, **values)


@dataclass(frozen=True, eq=False)
class Shared:
    """The run's platform (`scenarios.platform`, replication 0, r0 and rt trained) and the
    Plackett–Luce logger's estimated `feed.placement` for each temperature a cell uses (it depends
    on the temperature alone: r0's scores and G are the same in every regime)."""
    platform: S.Platform
    placements: dict[float, feed.Placement]


def setup(key, config: RegimesConfig) -> Shared:
    """Build (and train) the platform and the placements once per run; `key` is the run's root key."""
    platform = S.platform(key, config.scenario, 0, (S.Trained("r0"), S.Trained("rt")))
    r0 = S.scores(platform, S.Trained("r0"))
    temperatures = sorted({cell_dials(config, point).temperature for point in grid_points(config)} - {0.0})
    contexts = np.arange(platform.world.n_users)

    def logger(temperature: float) -> feed.Policy:
        return logger_policy(platform, r0, dataclasses.replace(config.dials, temperature=temperature), config.level)

    return Shared(platform, {t: feed.placement(shared_key(key, "placement"), logger(t), contexts,
                                               num_samples=config.exposure_samples) for t in temperatures})


# ---- one regime ------------------------------------------------------------------------------------

def regime_config(scenario: S.ScenarioConfig, dials: Dials, level: str) -> S.ScenarioConfig:
    """The scenario of a regime: the level's epsilon, the drift (session = global_drift · sqrt(share),
    engagement = global_drift · sqrt(1 − share), the two walks), the log size and the watch
    signal's slope and shift (where the dials set them) from the dials."""
    drift = dataclasses.replace(scenario.drift, session=dials.global_drift * math.sqrt(dials.session_share),
                                engagement=dials.global_drift * math.sqrt(1.0 - dials.session_share),
                                item_walk=dials.item_walk, view_walk=dials.view_walk)
    watch = {name: value for name, value in (("watch_slope", dials.watch_slope), ("watch_shift", dials.watch_shift))
             if value is not None}
    return dataclasses.replace(scenario, drift=drift, log_sessions=dials.log_sessions,
                               **{level: dataclasses.replace(S.level_config(scenario, level), epsilon=dials.epsilon)},
                               signals=dataclasses.replace(scenario.signals, **watch))


def _standardised(table: np.ndarray) -> np.ndarray:
    """Each row minus its mean over its standard deviation (f32[U, A]; a constant row -> 0)."""
    table = np.asarray(table, np.float64)
    sd = table.std(axis=1, keepdims=True)
    return ((table - table.mean(axis=1, keepdims=True)) / np.where(sd > 0, sd, 1.0)).astype(np.float32)


def shifted_generator(platform: S.Platform, target_scores: feed.ItemFn, shift: float,
                      level: str) -> feed.FixedCandidates:
    """G′: the top N per user (N: the level's candidates) of (1 − shift)·z(retrieval) + shift·z(target
    scores) (z: standardised per user); shift 0 returns the level's G itself."""
    if shift == 0:
        return platform.candidates[level]
    blend = ((1.0 - shift) * _standardised(S.retrieval_scores(platform).params)
             + shift * _standardised(target_scores.params))
    n = S.level_config(platform.config, level).candidates
    return feed.top_k_candidates(feed.from_table(blend), n, platform.world.n_users)


def logger_policy(platform: S.Platform, r0: feed.ItemFn, dials: Dials, level: str) -> feed.Policy:
    """R₀ on the level: ε-greedy around Sort(r0) on G (temperature 0, `scenarios.logging_policy`), or
    Plackett–Luce over per-user standardised r0 scores at the dial's temperature on G."""
    if dials.temperature == 0:
        return S.logging_policy(platform, level, r0)
    ranker = feed.PlackettLuce(feed.from_table(_standardised(r0.params)), jnp.float32(dials.temperature))
    return feed.Policy(platform.candidates[level], ranker, S.level_config(platform.config, level).feed_length)


@jax.jit
def _table_value(quality, activity, table):
    return jnp.einsum("sxa,xa,x->s", quality, table, activity)


def table_value(scenario: feed.Scenario, table) -> np.ndarray:
    """Online reward per session and signal of a policy with exposure table ε f32[X, A] under the
    scenario's view model, without within-session violations: Σ_x p(x) Σ_a q_s(x, a) ε(x, a)
    (`feed.online_value`'s value for an exact policy).  f64[S]."""
    quality = jnp.stack([q.params for q in scenario.quality])
    return np.asarray(_table_value(quality, scenario.activity, table), np.float64)


def difference_moments(data: ope.LoggedData, targets: dict, m, logger: str = "R0") -> dict:
    """Mean and standard error over trajectories of Δ_τ(m) = DCG_τ(ε; m) − DCG_τ(ε₀; m), the
    registry's paired difference of "dcg" (clipped IPS) of every target against the logger's own
    exposures (`ope.contributions`, `ope.summarise` with the logger as baseline), for every m.
    data: one signal's log; targets: {name: `ope.Target`} with the logger under ``logger``; m: f[M].
    Returns {name: (mean f64[M], se f64[M])} of the targets other than the logger."""
    summary = ope.summarise(ope.contributions(data, targets, m, estimators="dcg"), m, baseline=logger)
    return {name: (summary["dcg", name]["difference"], summary["dcg", name]["se"]) for name in targets
            if name != logger}


def _day_quantities(platform: S.Platform, dials: Dials, today: S.Day, log: feed.Log, d: int) -> list[dict]:
    """The day's `DAY_QUANTITIES` records: the log session-length factor and the engagement factor
    of the day's drift, the mean logged depth and the largest importance weight 1/ε₀ of the log."""
    viewed = np.asarray(log.viewed)
    logged = np.asarray(log.logging_exposure)[viewed]
    log_length = dials.global_drift * math.sqrt(dials.session_share) * today.session + (
        dials.view_walk * float(S.walk(platform, "view", d)[0]) if dials.view_walk > 0 else 0.0)
    return [{"signal": "", "target": "", "quantity": q, "m": math.nan, "value": float(v)}
            for q, v in zip(DAY_QUANTITIES, (log_length, today.engagement, float(np.mean(np.sum(viewed, axis=1))),
                                             float(1.0 / logged.min())))]


def one_click_quantities(rewards, viewed, logging_exposure, target_exposure) -> dict[str, float]:
    """The `ONE_CLICK` quantities of one signal's log: among the sessions with exactly one positive
    label a, their share of the sessions with any, their mean viewed depth, and the mean of ε₀(a) and
    ε_t(a). With one positive label, the debiased label 1/ε₀(a) is also the ideal's, so such a
    session's nDCG (pbm, Q̂) is ε_t(a) / S(1) = ε_t(a) (the pbm's S(1) = 1): the mean of the last is
    nDCG (skip) over those sessions. rewards: [N, K]; viewed: bool[N, K]; logging_exposure,
    target_exposure: f[N, K] of the logged items. NaN where no session has one label."""
    viewed = np.asarray(viewed)
    labels = np.asarray(rewards, np.float64) * viewed
    counts = np.sum(labels > 0, axis=1)
    one = counts == 1
    if not one.any():
        return dict.fromkeys(ONE_CLICK, math.nan)
    rank = np.argmax(labels[one] > 0, axis=1)
    rows = np.flatnonzero(one)
    values = (one.sum() / np.sum(counts > 0), np.mean(np.sum(viewed[one], axis=1)),
              np.mean(np.asarray(logging_exposure)[rows, rank]), np.mean(np.asarray(target_exposure)[rows, rank]))
    return {name: float(value) for name, value in zip(ONE_CLICK, values)}


def correlated_estimates(data: dict, targets: dict) -> dict[tuple[str, str], tuple[float, float]]:
    """{(`CORRELATED` estimator, policy): (value, standard error)} of the target rt and the logger
    R₀ (`SERIES`) on one signal's log: DCG {log, pbm} x {C (m = 1), Q̂ (m = ∞)} and nDCG (pbm, Q̂)
    with sessions without an ideal skipped or counted as 0, through the registry
    (`table2_estimates.contributions`, `.estimates`). data, targets: `table2_estimates.inputs` of
    the log under the views "log" and "pbm"."""
    only = {view: {name: by[name] for name in SERIES} for view, by in targets.items()}
    estimates = table2_estimates.estimates(table2_estimates.contributions(data, only, math.inf, CORRELATED))
    return {(key, name): estimates[key, name] for key in CORRELATED for name in SERIES}


def _online(key, platform: S.Platform, scenario: feed.Scenario, policies: dict, true: dict,
            level: S.LevelConfig) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{name: (online reward per session f64[S], its Monte Carlo SE f64[S])} of every policy on the
    day: `table_value` of its true exposure table (SE 0) on a level without within-session
    violations, else `scenarios.online` (exact for the deterministic targets; a Monte Carlo mean
    over the scenario's online_samples rankings per context for a stochastic logger, from `key`)."""
    if not level.breaks_session:
        return {name: (table_value(scenario, table), np.zeros(len(scenario.signals))) for name, table in true.items()}
    values = {name: S.online(jax.random.fold_in(key, i), platform, scenario, policy)
              for i, (name, policy) in enumerate(policies.items())}
    return {name: (np.asarray(v.mean, np.float64), np.asarray(v.standard_error, np.float64))
            for name, v in values.items()}


def _day_records(key, online_key, platform: S.Platform, config: RegimesConfig, dials: Dials, policies: dict,
                 placements: dict, log_tables: dict, d: int) -> list[dict]:
    """Records of one day of a regime (`COLUMNS` less map, x, y, replication). policies: {"R0":
    R₀, label: target}; placements: their `feed.placement` (the same every day: exact for the
    Sort and ε-greedy rankers, estimated for the Plackett–Luce logger); log_tables: their exposure
    tables under the log discount; the platform carries the regime's scenario config; `key` draws
    the log, `online_key` the Monte Carlo online values of a violated level (`_online`)."""
    lv = S.level_config(platform.config, config.level)
    n_items = platform.world.n_items
    today = S.day(platform, config.level, d)
    scenario = today.scenario

    def tables(view) -> dict:
        return {name: feed.placement_exposure(placed, view, n_items) for name, placed in placements.items()}

    true = tables(scenario.view)
    log = feed.simulate(key, scenario, policies["R0"], dials.log_sessions, day=d, logging_exposure=true["R0"])
    viewed = log.viewed
    online = _online(online_key, platform, scenario, policies, true, lv)
    out = _day_quantities(platform, dials, today, log, d)
    pbm = feed.fit_view_model(viewed)
    exposures = {view: {name: ope.logged_exposures(log, table) for name, table in by.items()}
                 for view, by in (("log", log_tables), ("pbm", tables(pbm)))}
    discount = feed.view_probability(pbm, lv.feed_length)
    m = np.asarray(config.m, np.float64)
    for s, signal in enumerate(scenario.signals):
        out += [{"signal": signal, "target": name, "quantity": "online", "m": math.nan, "value": float(v[s])}
                for name, (v, _) in online.items()]
        if lv.breaks_session:
            out += [{"signal": signal, "target": name, "quantity": "online_se", "m": math.nan, "value": float(se[s])}
                    for name, (_, se) in online.items()]
        data, targets = table2_estimates.inputs(log.rewards[s], viewed, exposures, discount)
        values = correlated_estimates(data, targets)
        one_click = one_click_quantities(log.rewards[s], viewed, exposures["pbm"]["R0"], exposures["pbm"][TARGET])
        out += [{"signal": signal, "target": TARGET, "quantity": q, "m": math.nan, "value": v}
                for q, v in one_click.items()]
        for (q, name), (value, se) in values.items():
            out += [{"signal": signal, "target": name, "quantity": q, "m": math.nan, "value": float(value)},
                    {"signal": signal, "target": name, "quantity": f"se[{q}]", "m": math.nan, "value": float(se)}]
        moments = difference_moments(data["pbm"], targets["pbm"], m)
        for name, (mean, se) in moments.items():
            out += [{"signal": signal, "target": name, "quantity": q, "m": float(mv), "value": float(v)}
                    for q, vals in (("delta", mean), ("delta_se", se)) for mv, v in zip(m, vals)]
    return out


def compute(key, config: RegimesConfig, cell: dict, shared: Shared) -> list[dict]:
    """Records of one cell: its regime's `days` days, written for each of its grid points
    (`cell_points`). `key` is the run's root key; day t of replication r draws its log from
    fold_in(shared_key(key, "replication:r"), t) at every grid point and, on a level with a cascade
    or satiation, the Monte Carlo online values from fold_in(shared_key(key, "online:r"), t)."""
    points = cell_points(cell)
    dials = cell_dials(config, points[0])
    platform = dataclasses.replace(shared.platform, config=regime_config(config.scenario, dials, config.level))
    r0 = S.scores(platform, S.Trained("r0"))
    rankers = {S.ranker_label(r): S.scores(platform, r) for r in config.improving + config.harmful}
    generator = shifted_generator(platform, rankers[TARGET], dials.generator_shift, config.level)
    feed_length = S.level_config(platform.config, config.level).feed_length
    policies = {"R0": logger_policy(platform, r0, dials, config.level),
                **{name: feed.Policy(generator, feed.Sort(scores), feed_length) for name, scores in rankers.items()}}
    base = shared_key(key, f"replication:{cell['replication']}")
    online_base = shared_key(key, f"online:{cell['replication']}")
    contexts = np.arange(platform.world.n_users)
    placements = {name: (shared.placements[dials.temperature] if name == "R0" and dials.temperature > 0
                         else feed.placement(None, p, contexts)) for name, p in policies.items()}
    log_tables = {name: feed.placement_exposure(placed, feed.Logarithmic(), platform.world.n_items)
                  for name, placed in placements.items()}
    activity = np.asarray(jax.nn.softmax(platform.world.user_log_activity), np.float64)     # the base user mix
    out = [{"day": -1, "signal": "", "target": name, "quantity": "lost", "m": math.nan,
            "value": float(np.asarray(ope.support_loss(log_tables["R0"], table), np.float64) @ activity)}
           for name, table in log_tables.items() if name != "R0"]
    days = config.paper_days if points[0]["map"] == PAPER else config.scenario.days
    for t in range(days):
        d = cell["replication"] * days + t
        records = _day_records(jax.random.fold_in(base, t), jax.random.fold_in(online_base, t), platform, config,
                               dials, policies, placements, log_tables, d)
        out += [{"day": d, **record} for record in records]
    return [{**point, "replication": cell["replication"], **record} for point in points for record in out]
