"""The assumptions study's computation: the violations, the policies and the estimator's view
model of each (assumption, dial), the logs, every registered estimator on them and the exact online
truth (the package docstring states the design)."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from simrec import feed, ope
from simrec.feed.policies import table_values
from simrec.runner import cell_key, shared_key
from simrec_studies.common import scenarios

if TYPE_CHECKING:
    from simrec_studies.assumptions import AssumptionsConfig

#: the violations, in the paper's order of assumptions
ASSUMPTIONS = ("fatigue", "cascade", "context", "satiation", "view_log", "view_exp", "support")
BASELINE = "none"
#: the dial field of the config of each violation
DIAL_FIELDS = {"fatigue": "fatigue", "cascade": "cascade", "context": "depth_shift", "satiation": "satiation",
               "view_log": "misspecification", "view_exp": "misspecification", "support": "unsupported"}
#: the estimators scored: every one of the `simrec.ope` registry (each log provides what they all need:
#: the view model's discount and a reward model), so an estimator added there is scored here too
ESTIMATORS = "all"


# ---- the violations: pure functions of the platform and the dial ---------------------------------

def misspecified_view(view: feed.ViewModel, family: str, blend: float, feed_length: int, gamma: float = 0.9
                      ) -> feed.Tabulated:
    """The estimator's view model S_λ = (1 − λ) S + λ S_family over `feed_length` ranks, S the true
    (position-only) survival, S_family = 1/log₂(i+1) ("logarithmic") or gamma^{i−1} ("exponential").
    λ = `blend` in [0, 1]; λ = 0 gives S itself (bit for bit). Returns a `feed.Tabulated`."""
    if family not in ("logarithmic", "exponential"):
        raise ValueError(f"family must be 'logarithmic' or 'exponential', got {family!r}")
    if not 0 <= blend <= 1:
        raise ValueError(f"blend must be in [0, 1], got {blend!r}")
    wrong = feed.Logarithmic() if family == "logarithmic" else feed.Exponential(jnp.float32(gamma))
    truth = feed.view_probability(view, feed_length)
    other = feed.view_probability(wrong, feed_length)
    return feed.Tabulated(jnp.float32(1.0 - blend) * truth + jnp.float32(blend) * other)


def excluded_items(key: jax.Array, num_items: int, share: float) -> np.ndarray:
    """bool[A]: the items left out of the logger's generator at share s — the first round(s·A) of a
    fixed random order of the catalogue (from `key`), so a larger share removes a superset."""
    order = np.asarray(jax.random.permutation(key, num_items))
    out = np.zeros(num_items, bool)
    out[order[:int(round(share * num_items))]] = True
    return out


def logging_candidates(retrieval: np.ndarray, excluded: np.ndarray, num_candidates: int) -> feed.FixedCandidates:
    """G₀: the top `num_candidates` items of the retrieval scores f32[U, A] among the items not
    `excluded` (bool[A]) — with nothing excluded, exactly the platform's G (`scenarios.platforms`)."""
    scores = np.where(excluded[None, :], np.float32(retrieval.min() - 1.0), retrieval).astype(np.float32)
    return feed.top_k_candidates(feed.from_table(scores), num_candidates, retrieval.shape[0])


def shifted_view(view: feed.ViewModel, shift: float) -> feed.ViewModel:
    """The view model with its log session-length factor moved by `shift`, as the day drift moves it
    (`scenarios.day`): ScrollBudget a → 1 + (a − 1)·e^{−shift}, Exponential γ → 1 − (1 − γ)·e^{−shift}
    (shift > 0 scrolls deeper); shift 0 returns `view` itself."""
    if shift == 0:
        return view
    if isinstance(view, feed.ScrollBudget):
        return dataclasses.replace(view, exponent=jnp.float32(1.0 + (float(view.exponent) - 1.0) * math.exp(-shift)))
    if isinstance(view, feed.Exponential):
        return feed.Exponential(jnp.float32(1.0 - (1.0 - float(view.gamma)) * math.exp(-shift)))
    raise ValueError(f"view must be a ScrollBudget or Exponential view model (the levels' models), got {view!r}")


def user_types(num_users: int) -> np.ndarray:
    """i32[U]: the context violation's user type — 0 (scrolls deeper) for an even user index, 1
    (shallower) for an odd one; the world draws its users i.i.d., so the split is independent of them."""
    return (np.arange(num_users) % 2).astype(np.int32)


def context_types(scenario: feed.Scenario, shift: float) -> tuple:
    """The two user types of the context violation: ((w_t, scenario_t), ...) for t = 0 (view model
    `shifted_view`(+shift)) and 1 (−shift), w_t the type's share of the activity and scenario_t the
    scenario with its activity restricted to the type's users and renormalised."""
    activity = np.asarray(scenario.activity, np.float64)
    types = user_types(activity.shape[0])
    out = []
    for t, sign in enumerate((1.0, -1.0)):
        part = np.where(types == t, activity, 0.0)
        out.append((float(part.sum() / activity.sum()),
                    dataclasses.replace(scenario, view=shifted_view(scenario.view, sign * shift),
                                        activity=jnp.asarray(part / part.sum(), jnp.float32))))
    return tuple(out)


def pooled_view(types: tuple, feed_length: int) -> feed.Tabulated:
    """The population's rank-only view model P(V=1|i) = Σ_t w_t S_t(i) over `feed_length` ranks, for
    `types` as `context_types` returns them: the survival a learnt pbm (`feed.fit_view_model`)
    converges to on the pooled log."""
    return feed.Tabulated(sum(jnp.float32(w) * feed.view_probability(scenario.view, feed_length)
                              for w, scenario in types))


def type_sessions(num_sessions: int, weights) -> tuple[int, ...]:
    """Fixed sessions per type, proportional to the activity shares `weights` (w₀, w₁): n₀ =
    round(N·w₀), n₁ = N − n₀ (a proportionally stratified sample of the population)."""
    first = int(round(num_sessions * float(weights[0])))
    if not 1 <= first < num_sessions:
        raise ValueError(f"both user types need a session: {num_sessions} sessions with shares {tuple(weights)}")
    return first, num_sessions - first


@dataclass(frozen=True, eq=False)
class Shared:
    """The run's platform (`scenarios.platform`, replication 0), its retrieval scores f32[U, A] (the
    candidate generator's, for G₀ of the support violation) and the key of the item order that
    decides which items the logger loses."""
    platform: scenarios.Platform
    retrieval: np.ndarray
    exclusion_key: jax.Array


def setup(key, config: AssumptionsConfig) -> Shared:
    """Build (and train) the platform once per run; `key` is the run's root key."""
    platform = scenarios.platform(key, config.scenario, 0, config.comparison.policies)
    retrieval = np.asarray(table_values(scenarios.retrieval_scores(platform)), np.float32)
    return Shared(platform, retrieval, shared_key(key, "assumptions:excluded"))


@dataclass(frozen=True, eq=False)
class Setting:
    """One (assumption, dial): the platform (its config carrying the level's switches), the day's
    scenario, R₀, the targets {label: policy}, the view model the estimators assume and, for the
    context violation, the user types ((w_t, scenario_t), ...) that replace `scenario` (`context_types`)."""
    platform: scenarios.Platform
    scenario: feed.Scenario
    logger: feed.Policy
    targets: dict
    view: feed.ViewModel
    types: tuple = ()


def setting(config: AssumptionsConfig, shared: Shared, assumption: str, dial: float) -> Setting:
    """The scenario, policies and estimator view model of `assumption` at `dial` (module docstring).
    Every assumption goes through the same construction, so dial 0 is the baseline."""
    if assumption not in (BASELINE,) + ASSUMPTIONS:
        raise ValueError(f"assumption must be one of {(BASELINE,) + ASSUMPTIONS}, got {assumption!r}")
    dial = float(dial)
    level = scenarios.level_config(config.scenario, config.level)
    changes = {"cascade": dial} if assumption == "cascade" else {"satiation": dial} if assumption == "satiation" \
        else {}
    platform = shared.platform
    if changes:       # LevelConfig switches: `scenarios._day_view` wraps a Cascade only for p > 0
        violated = dataclasses.replace(config.scenario, **{config.level: dataclasses.replace(level, **changes)})
        platform = dataclasses.replace(platform, config=violated)
    scenario = scenarios.day(platform, config.level, 0).scenario
    if assumption == "fatigue":
        scenario = dataclasses.replace(scenario, fatigue=dial)
    logger = scenarios.logging_policy(platform, config.level, scenarios.scores(platform, config.comparison.logger))
    if assumption == "support":
        excluded = excluded_items(shared.exclusion_key, platform.world.n_items, dial)
        logger = dataclasses.replace(logger, generator=logging_candidates(shared.retrieval, excluded,
                                                                           level.candidates))
    targets = {scenarios.ranker_label(r): scenarios.target_policy(platform, config.level, scenarios.scores(platform, r))
               for r in config.comparison.targets}
    view = scenario.view
    if assumption in ("view_log", "view_exp"):
        view = misspecified_view(scenario.view, "logarithmic" if assumption == "view_log" else "exponential", dial,
                                 level.feed_length, config.exponential_gamma)
    types = ()
    if assumption == "context" and dial > 0:          # two user types only for δ > 0: dial 0 is the baseline
        types = context_types(scenario, dial)
        view = pooled_view(types, level.feed_length)
    return Setting(platform, scenario, logger, targets, view, types)


# ---- the estimators: every one of the registry on one log ---------------------------------------

class Estimates(NamedTuple):
    """The estimates on one log: per signal, `ope.summarise`'s {(metric, target): {"value",
    "value_se", "difference", "se", "low", "high", "p": f64[M]}} (R₀ under "R0", the differences
    against it), and each target's expected views per session on items R₀ never exposes (``lost``,
    Asm. 5, `ope.support_loss`)."""
    summaries: dict
    lost: dict


def estimates(log: feed.Log, logger: feed.Policy, targets: dict, view, m, *, confidence: float = 0.99,
              zero_ideal: str = "zero", prior_views: float = 10.0) -> Estimates:
    """Every registered estimator (`simrec.ope.ESTIMATORS`: clipped-IPS DCG, nDCG with the
    same-discount and the all-viewed ideal, pnDCG, self-normalised and doubly robust DCG, and any
    estimator registered since) of R₀ and each target on R₀'s log, for
    every clipping value m at once, with the paired difference f̄(R_t) − f̄(R₀) and its normal CI
    at `confidence` (`ope.from_log`, `ope.contributions`, `ope.summarise`; ratio estimators by the
    paired delta method). The exposures ε₀, ε and the nDCG ideals' discount are computed under
    `view`. DR's reward model is `ope.click_rate_model` of the same log (its SE treats q̂ as fixed, so it
    misses q̂'s fitting noise, most at small m). log: R₀'s `feed.Log`; logger, targets: R₀ and
    {name: R_t}; m: f[M]."""
    num_items = feed.num_items(logger)
    models = {signal: ope.click_rate_model(log, num_items, s, prior_views=prior_views)
              for s, signal in enumerate(log.signals)}
    on = ope.from_log(log, {"R0": logger, **targets}, view, reward_models=models)
    summaries = {}
    for signal in log.signals:
        parts = ope.contributions(on.data[signal], on.targets[signal], m, estimators=ESTIMATORS,
                                  options={"zero_ideal": zero_ideal})
        summaries[signal] = ope.summarise(parts, m, baseline="R0", confidence=confidence)
    loss = {name: float(np.mean(np.asarray(ope.support_loss(on.tables["R0"], on.tables[name]))[on.rows]))
            for name in targets}
    return Estimates(summaries, loss)


def setting_estimates(log: feed.Log, setting_: Setting, config: AssumptionsConfig) -> Estimates:
    """`estimates` of a setting's targets on a log of its R₀, under the estimator's view model, with
    the config's comparison settings."""
    comparison = config.comparison
    return estimates(log, setting_.logger, setting_.targets, setting_.view, comparison.m,
                     confidence=comparison.confidence, zero_ideal=comparison.zero_ideal,
                     prior_views=config.prior_views)


# ---- the truth -----------------------------------------------------------------------------------

def truth(key, config: AssumptionsConfig, setting_: Setting) -> dict:
    """The online values {"R0" and each target: (mean f64[S], se f64[S])}: exact (`scenarios.online`,
    i.e. `feed.online_value`; Monte Carlo over scenario.online_samples rankings per context only for
    R₀'s uniform part under a cascade or satiation, policy i drawing from fold_in(key, i)) or, with
    fatigue, the mean of `truth_arms` simulated deployments of log_sessions sessions per policy
    (`feed.ab_test`, each arm from a fresh state). With user types, Σ_t w_t V_t of each type's values
    (type t from fold_in(key, t); standard errors combined as sqrt(Σ_t w_t² se_t²))."""
    if setting_.types:
        parts = [truth(jax.random.fold_in(key, t), config, dataclasses.replace(setting_, scenario=sc, types=()))
                 for t, (_, sc) in enumerate(setting_.types)]
        weights = [w for w, _ in setting_.types]
        return {name: (sum(w * part[name][0] for w, part in zip(weights, parts)),
                       np.sqrt(sum((w * part[name][1]) ** 2 for w, part in zip(weights, parts))))
                for name in parts[0]}
    policies = {"R0": setting_.logger, **setting_.targets}
    if setting_.scenario.fatigue > 0:
        arms = config.truth_arms
        ab = feed.ab_test(key, setting_.scenario, [p for p in policies.values() for _ in range(arms)],
                          config.scenario.log_sessions, round_size=config.round_size)
        means = ab.mean.reshape(len(policies), arms, -1)
        errors = ab.standard_error.reshape(len(policies), arms, -1)
        return {name: (means[i].mean(axis=0), np.sqrt((errors[i] ** 2).sum(axis=0)) / arms)
                for i, name in enumerate(policies)}
    out = {}
    for i, (name, policy) in enumerate(policies.items()):
        value = scenarios.online(jax.random.fold_in(key, i), setting_.platform, setting_.scenario, policy)
        out[name] = (np.asarray(value.mean, np.float64), np.asarray(value.standard_error, np.float64))
    return out


# ---- cells ---------------------------------------------------------------------------------------

def cells(config: AssumptionsConfig) -> list[dict]:
    """The baseline (assumption "none", dial 0) and every violation's non-zero dials."""
    out = [{"assumption": BASELINE, "dial": 0.0}]
    for assumption in config.assumptions:
        out += [{"assumption": assumption, "dial": dial} for dial in config.dials(assumption)[1:]]
    return out


def log_key(root, replication: int):
    """The key of replication r's log: the same in every cell (common random numbers)."""
    return cell_key(root, {"part": "log", "replication": int(replication)})


def simulate_log(root, config: AssumptionsConfig, setting_: Setting, replication: int) -> feed.Log:
    """Replication r's log of R₀ in the setting's scenario (`feed.simulate`, exact ε₀ recorded). With
    user types: `type_sessions` sessions of each type in its own scenario (type t from
    fold_in(log key, t), its own ε₀ recorded), concatenated in type order (`feed.concatenate`)."""
    if setting_.types:
        counts = type_sessions(config.scenario.log_sessions, [w for w, _ in setting_.types])
        return feed.concatenate(
            feed.simulate(jax.random.fold_in(log_key(root, replication), t), scenario, setting_.logger, n,
                          logging_exposure=scenarios.logging_exposure(scenario, setting_.logger),
                          round_size=config.round_size)
            for t, ((_, scenario), n) in enumerate(zip(setting_.types, counts)))
    exposure = scenarios.logging_exposure(setting_.scenario, setting_.logger)
    return feed.simulate(log_key(root, replication), setting_.scenario, setting_.logger,
                         config.scenario.log_sessions, logging_exposure=exposure, round_size=config.round_size)


def _estimate_records(est: Estimates, signals, targets, m, truth_: dict) -> list[dict]:
    """The records of one log's estimates (`COLUMNS` less assumption, dial and replication): per
    signal, target, estimator and m, the difference against R₀ and its SE, R₀'s own estimate, the
    target's lost exposure, and the truth ({"R0": (V₀ f64[S], se), name: (V_t − V₀, se)})."""
    base = truth_["R0"][0]
    out = []
    for s, signal in enumerate(signals):
        for name in targets:
            for metric in dict.fromkeys(metric for metric, _ in est.summaries[signal]):
                summary, r0 = est.summaries[signal][(metric, name)], est.summaries[signal][(metric, "R0")]["value"]
                out += [{"signal": signal, "target": name, "metric": metric, "m": float(mi),
                         "est_diff": float(summary["difference"][i]), "est_se": float(summary["se"][i]),
                         "est_base": float(r0[i]), "lost": float(est.lost[name]),
                         "true_diff": float(truth_[name][0][s]), "true_se": float(truth_[name][1][s]),
                         "true_base": float(base[s])}
                        for i, mi in enumerate(m)]
    return out


def compute(key, config: AssumptionsConfig, cell: dict, shared: Shared) -> list[dict]:
    """Records of one (assumption, dial); `key` is the run's root key. The truth draws from
    cell_key(key, {"part": "truth", **cell}), replication r's log from `log_key`. Replication −1
    holds the truth (metric "", m NaN), replications 0, 1, ... the estimates on their logs."""
    assumption, dial = cell["assumption"], float(cell["dial"])
    setting_ = setting(config, shared, assumption, dial)
    values = truth(cell_key(key, {"part": "truth", **cell}), config, setting_)
    signals = setting_.scenario.signals
    base, base_se = values["R0"]
    true = {name: (mean - base, np.hypot(se, base_se)) for name, (mean, se) in values.items() if name != "R0"}
    common = {"assumption": assumption, "dial": dial}
    out = [{**common, "replication": -1, "signal": signal, "target": name, "metric": "", "m": math.nan,
            "est_diff": math.nan, "est_se": math.nan, "est_base": math.nan, "lost": math.nan, "true_diff": float(d[s]),
            "true_se": float(e[s]), "true_base": float(base[s])}
           for s, signal in enumerate(signals) for name, (d, e) in true.items()]
    for r in range(config.replications):
        est = setting_estimates(simulate_log(key, config, setting_, r), setting_, config)
        out += [{**common, "replication": r, **row}
                for row in _estimate_records(est, signals, setting_.targets, config.comparison.m,
                                             {"R0": values["R0"], **true})]
    return out
