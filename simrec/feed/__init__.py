"""Feed simulator: view models, ranking policies and their exposures, sessions and logs, and the
online ground truth (Jeunen, Potapov & Ustimenko, KDD'24 §3–4).

    from simrec import feed
    scenario = feed.Scenario(feed.Logarithmic(), (feed.from_table(q_like), feed.from_table(q_watch)),
                             activity, signals=("like", "watch"))
    logger = feed.Policy(feed.all_items(A), feed.EpsilonGreedy(feed.Sort(feed.from_table(s0)), 0.1), K)
    log = feed.simulate(key, scenario, logger, 100_000)
    truth = feed.online_value(key, scenario, target)
"""
from simrec.feed.online import ABTest, OnlineValue, ab_test, online_value
from simrec.feed.policies import (ContextTables, EpsilonGreedy, Exposure, FixedCandidates, ItemFn, PlackettLuce,
                                  Policy, RandomSubset, Sort, TopK, all_items, context_tables, item_values, exposure,
                                  exposure_of, from_table, is_deterministic, is_exact, num_items, race_nodes,
                                  sample_candidates, sample_ranking, top_k_candidates)
from simrec.feed.sessions import (Log, Scenario, concatenate, depth, logging_exposure_table, satiated_quality,
                                  session_chunks, simulate)
from simrec.feed.position_bias import (ClickLog, CurveEstimate, click_log, curve_view_model, harvesting_counts,
                                      harvesting_curve, randomisation_curve, randomised_top, regression_em)
from simrec.feed.views import (Cascade, Exponential, Logarithmic, ScrollBudget, Tabulated, ViewModel,
                               depth_from_uniform, fit_view_model, position_model, sample_depth, view_probability)

__all__ = [
    "Logarithmic", "Exponential", "ScrollBudget", "Tabulated", "Cascade", "ViewModel",
    "view_probability", "sample_depth", "depth_from_uniform", "fit_view_model", "position_model",
    "ItemFn", "from_table", "item_values", "FixedCandidates", "all_items", "top_k_candidates", "TopK",
    "RandomSubset",
    "Sort", "PlackettLuce", "EpsilonGreedy", "Policy", "Exposure", "num_items", "is_exact",
    "is_deterministic", "race_nodes", "sample_candidates", "sample_ranking", "exposure", "exposure_of",
    "ContextTables", "context_tables",
    "Scenario", "Log", "simulate", "logging_exposure_table", "session_chunks", "satiated_quality", "concatenate",
    "depth",
    "OnlineValue", "ABTest", "online_value", "ab_test",
    "ClickLog", "CurveEstimate", "click_log", "randomised_top", "randomisation_curve", "regression_em",
    "harvesting_counts", "harvesting_curve", "curve_view_model",
]
