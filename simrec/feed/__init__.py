"""Feed simulator: view models, ranking policies and their exposures, sessions and logs, and the
online ground truth (Jeunen, Potapov & Ustimenko, KDD'24 §3–4).

    from simrec import feed
    scenario = feed.Scenario(feed.Logarithmic(), (feed.from_table(q_like), feed.from_table(q_watch)),
                             activity, signals=("like", "watch"))
    logger = feed.Policy(feed.all_items(A), feed.EpsilonGreedy(feed.Sort(feed.from_table(s0)), 0.1), K)
    log = feed.simulate(key, scenario, logger, 100_000)
    truth = feed.online_value(key, scenario, target)

Modules: `views` (view models), `policies` (item functions, generators, rankers, policies),
`sampling` (drawing rankings), `exposure` (exact, race and Monte Carlo exposures, and a policy's
rank probabilities for the exposure under any view model; the package name ``feed.exposure`` is the
function), `sessions` (Scenario, Log, simulate), `worlds` (a Scenario over
a `simrec.world.World` or `simrec.procedural.ProceduralWorld`: `scenario_from_world`), `online`
(online value, A/B tests), `position_bias` (the examination curve from clicks), `slates` (the
probability of a shown ranking prefix, for the slate estimators of `simrec.ope`). Beside the feed,
`slotwise` is the other slate model of the ranking-OPE literature, imported by name (``from
simrec.feed import slotwise``): slates drawn slot by slot with replacement from a small action set,
rewards that interact across slots, and their exact value (the synthetic slates of Open Bandit
Pipeline and of Kiyohara et al. WSDM'22 and KDD'23).
"""
from simrec.feed.online import ABTest, OnlineValue, ab_test, online_value
from simrec.feed.policies import (EpsilonGreedy, FixedCandidates, ItemFn, PlackettLuce, Policy, RandomSubset, Sort,
                                  TopK, all_items, from_table, is_deterministic, is_exact, item_values, num_items,
                                  sample_candidates, top_k_candidates)
from simrec.feed.sampling import ContextTables, context_tables, sample_ranking
# the function `exposure` is bound after the submodule `simrec.feed.exposure` is imported, so
# `simrec.feed.exposure` is the function (as it always was); the module is sys.modules' entry
from simrec.feed.exposure import (Exposure, Placement, exposure, exposure_of, placement, placement_exposure,
                                  race_nodes)
from simrec.feed.sessions import (SATIATED_BY, Log, Scenario, concatenate, depth, logging_exposure_table,
                                  satiated_quality, scenario_quality, session_chunks, simulate)
from simrec.feed.position_bias import (ClickLog, CurveEstimate, click_log, curve_view_model, harvesting_counts,
                                      harvesting_curve, randomisation_curve, randomised_top, regression_em)
from simrec.feed.views import (Cascade, Exponential, Logarithmic, ScrollBudget, Tabulated, ViewModel,
                               depth_from_uniform, fit_view_model, position_model, sample_depth, view_probability)
from simrec.feed.worlds import scenario_from_world, world_activity, world_quality
from simrec.feed.slates import has_prefix_probability, next_item_mean, prefix_log_probability

__all__ = [
    "Logarithmic", "Exponential", "ScrollBudget", "Tabulated", "Cascade", "ViewModel",
    "view_probability", "sample_depth", "depth_from_uniform", "fit_view_model", "position_model",
    "ItemFn", "from_table", "item_values", "FixedCandidates", "all_items", "top_k_candidates", "TopK",
    "RandomSubset",
    "Sort", "PlackettLuce", "EpsilonGreedy", "Policy", "Exposure", "num_items", "is_exact",
    "is_deterministic", "race_nodes", "sample_candidates", "sample_ranking", "exposure", "exposure_of",
    "Placement", "placement", "placement_exposure",
    "ContextTables", "context_tables",
    "Scenario", "SATIATED_BY", "Log", "simulate", "logging_exposure_table", "session_chunks", "satiated_quality",
    "scenario_quality", "concatenate",
    "depth", "scenario_from_world", "world_quality", "world_activity",
    "OnlineValue", "ABTest", "online_value", "ab_test",
    "ClickLog", "CurveEstimate", "click_log", "randomised_top", "randomisation_curve", "regression_em",
    "harvesting_counts", "harvesting_curve", "curve_view_model",
    "has_prefix_probability", "prefix_log_probability", "next_item_mean",
]
