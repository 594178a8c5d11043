"""The arena study on a tiny config: the truth against a hand computation, the error table and the
winners against the records, the estimators it scores, its outputs and its configuration."""
import dataclasses
import importlib
import json
import math

import jax
import numpy as np
import pandas as pd
import pytest

from simrec import feed, ope, runner
from simrec.runner import ConfigError, shared_key
from simrec_studies import arena

# the pilot log as long as the logs (6 x 1,000 sessions): one compilation of the simulator per cell;
# two clipping values: two MSE figures
CELLS = importlib.import_module("simrec_studies.arena.compute")    # the package's `compute` is the function
TINY = dataclasses.replace(arena.PRESETS["smoke"], catalogues=(6,), sessions=(300, 1_000), replications=6,
                           contexts=10, pilot_sessions=6_000, m=(10.0, math.inf))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("out") / "arena"
    runner.run(arena.STUDY, TINY, seed=0, out=out, preset="smoke", progress=False)
    return out


def test_the_truth_is_the_targets_exact_reward_computed_by_hand(run):
    """Position-based behaviour: Σ_x p(x) Σ_k γ^(k−1) q(x, σ_k) with σ the target's sorted top K;
    mixed: for the first half of the users each rank's click probability times ∏ (1 − β q) over the
    ranks above (satiation), for the others the position-based one; slate: over the depth d
    (P(D = d) = γ^(d−1) − γ^d, γ^(K−1) at d = K), each viewed rank's click probability times
    ∏ (1 − β q) over the other viewed ranks; mixed_all: over the depth, each user's ranks satiated by
    the partners of its own behaviour (none, above, the neighbours, every other viewed rank)."""
    records = pd.read_csv(run / "records.csv")
    w = arena.world(shared_key(jax.random.key(0), "world:6"), TINY, 6, TINY.group_sizes[0])
    order = np.argsort(-w.target_scores, axis=1, kind="stable")[:, :TINY.feed_length]
    q = np.take_along_axis(w.quality.astype(np.float64), order, axis=1)
    view = TINY.view_decay ** np.arange(TINY.feed_length)
    satiated = q * np.cumprod(np.concatenate([np.ones((q.shape[0], 1)), 1 - TINY.interaction * q[:, :-1]], 1), 1)
    first = np.arange(q.shape[0]) < round(TINY.satiated_share * q.shape[0])
    mixed = np.where(first[:, None], satiated, q)
    at_depth = np.append(view[:-1] - view[1:], view[-1])
    slate = sum(at_depth[d - 1] * sum(q[:, i] * np.prod([1 - TINY.interaction * q[:, j] for j in range(d) if j != i],
                                                         axis=0) for i in range(d))
                for d in range(1, TINY.feed_length + 1))
    members = CELLS.mixture_members(TINY)                  # mixed_all: each user's own behaviour
    assert np.array_equal(np.bincount(members, minlength=4), [2, 3, 3, 2])   # 10 users, shares of 1/4 each
    partners = {"position_based": lambda i, j: False, "satiation": lambda i, j: j < i,
                "neighbours": lambda i, j: abs(i - j) == 1, "slate": lambda i, j: j != i}
    mixed_all = np.mean([sum(at_depth[d - 1] * q[x, i] * np.prod([1 - TINY.interaction * q[x, j] for j in range(d)
                                                                   if partners[CELLS.MIXTURE[k]](i, j)])
                             for d in range(1, TINY.feed_length + 1) for i in range(d))
                         for x, k in enumerate(members)])
    expected = {"position_based": (q * view).sum(1).mean(), "mixed": (mixed * view).sum(1).mean(),
                "slate": slate.mean(), "mixed_all": mixed_all}
    assert set(expected) == set(TINY.behaviours)
    truth = records[records.estimator == "truth"]
    assert set(truth.logger) == {"plackett_luce", "epsilon_greedy"}          # one truth per logger's cell
    for behaviour, value in expected.items():
        assert truth[truth.behaviour == behaviour].value.to_numpy() == pytest.approx(value, rel=1e-5)


def test_every_online_value_estimator_is_scored_at_every_m_and_size(run):
    records = pd.read_csv(run / "records.csv")
    scored = records[records.estimator != "truth"]
    assert set(scored.estimator) == {"dcg", "sndcg", "dcg_beta", "dr", "mips", "rips", "snrips", "sips", "snsips", "sips_beta",
                                     "cascade_dr", "aips", "aips_chosen"}
    # AIPS with the true behaviour: DCG where every user is position-based, its own mix otherwise
    keys = ["behaviour", "catalogue", "logger", "exploration", "sessions", "replication", "m"]
    by = {e: scored[scored.estimator == e].set_index(keys).value.sort_index() for e in ("aips", "dcg", "rips")}
    pbm = by["aips"].index.get_level_values("behaviour") == "position_based"
    np.testing.assert_allclose(by["aips"][pbm], by["dcg"][pbm], rtol=1e-12)
    assert not np.allclose(by["aips"][~pbm], by["dcg"][~pbm]) and not np.allclose(by["aips"][~pbm], by["rips"][~pbm])
    per = scored.groupby(["behaviour", "logger", "sessions", "estimator", "m"]).replication.nunique()
    assert set(per) == {TINY.replications} and set(scored.sessions) == set(TINY.sessions)
    assert set(np.round(scored.m, 6)) == set(TINY.m) == {10.0, math.inf}
    assert arena.PRESETS["default"].m == (2.0, 10.0, 100.0, math.inf)


def test_error_table_and_winners_follow_from_the_records(run):
    records = pd.read_csv(run / "records.csv")
    table = arena.errors(records)
    truth = records[records.estimator == "truth"].groupby("behaviour").value.first()
    for _, row in table.sample(8, random_state=0).iterrows():
        values = records[(records.behaviour == row.behaviour) & (records.sessions == row.sessions)
                         & (records.logger == row.logger) & (records.exploration == row.exploration)
                         & (records.estimator == row.estimator) & np.isclose(records.m, row.m)].value
        relative = (values - truth[row.behaviour]) / truth[row.behaviour]
        assert row["relative MSE"] == pytest.approx(np.mean(relative ** 2))
        assert row.bias == pytest.approx(values.mean() - truth[row.behaviour])
    won = arena.winners(records)
    assert len(won) == len(TINY.behaviours) * len(TINY.sessions) * 2            # two loggers
    for _, row in won.iterrows():
        setting = table[(table.behaviour == row.behaviour) & (table.sessions == row.sessions)
                        & (table.logger == row.logger)]
        assert row["relative MSE"] == pytest.approx(setting["relative MSE"].min())
        assert row.winner == setting.loc[setting["relative MSE"].idxmin(), "variant"]
        assert row["winner alone"] == (row["tied with"] == "")


def test_the_estimator_to_use_is_the_one_best_or_tied_in_most_settings(run):
    """`recommendations` against a direct count over the winners table: per behaviour and log size,
    each estimator's settings where one of its variants wins or ties the winner; the README names
    the most frequent one, or every one level at the top (alphabetically: the same text in every
    process, whatever its string hashing)."""
    report = importlib.import_module("simrec_studies.arena.report")
    won = arena.winners(pd.read_csv(run / "records.csv"))
    picks = report.recommendations(won)
    assert len(picks) == len(TINY.behaviours) * len(TINY.sessions)
    for _, pick in picks.iterrows():
        g = won[(won.behaviour == pick.behaviour) & (won.sessions == pick.sessions)]
        estimators = [{v.split(", m = ")[0] for v in [w, *filter(None, t.split("; "))]}
                      for w, t in zip(g.winner, g["tied with"])]
        count = {e: sum(e in row for row in estimators) for row in estimators for e in row}
        top = max(count.values())
        assert pick.settings == len(g) and pick["best or tied"] == top
        assert pick.estimator == " or ".join(sorted(e for e, n in count.items() if n == top))
    readme = (run / "README.md").read_text()
    assert "Which estimator to use, per behaviour and log size" in readme
    assert f"N = {int(picks.sessions.iloc[0]):,}: {picks.estimator.iloc[0]}" in readme


def test_the_difference_table_and_sign_test_follow_from_the_records(run):
    """Relative MSE of target − rival against the truth's difference, and the sign test recomputed by
    hand from each log's difference and standard error at 99 %."""
    records = pd.read_csv(run / "records.csv")
    truth = records[records.estimator == "truth"]
    assert np.all(truth.difference != 0) and (truth.difference_se == 0).all()       # deterministic targets: exact
    table = arena.differences(records, TINY.confidence)
    for _, row in table.sample(8, random_state=1).iterrows():
        logs = records[(records.behaviour == row.behaviour) & (records.sessions == row.sessions)
                       & (records.logger == row.logger) & (records.estimator == row.estimator)
                       & np.isclose(records.m, row.m)]
        true = truth[(truth.behaviour == row.behaviour) & (truth.logger == row.logger)].difference.iloc[0]
        assert row["true difference"] == pytest.approx(true)
        assert row["relative MSE"] == pytest.approx(np.mean(((logs.difference - true) / true) ** 2))
        called = np.abs(logs.difference) > 2.5758293035489 * logs.difference_se
        assert row.power == pytest.approx(np.mean(called & (np.sign(logs.difference) == np.sign(true))))
        assert row["wrong sign"] == pytest.approx(np.mean(called & (np.sign(logs.difference) != np.sign(true))))


def test_slope_walks_down_the_standard_errors_while_the_intervals_meet():
    """Ordered by SE, largest first: [0, 2] and [0.9, 1.3] meet, [2.9, 3.1] does not: the second."""
    assert arena.slope_choice(np.array([1.0, 1.1, 3.0]), np.array([0.5, 0.1, 0.05])) == 1
    assert arena.slope_choice(np.array([1.0, 1.1, 1.05]), np.array([0.5, 0.1, 0.05])) == 2
    assert arena.slope_choice(np.array([5.0, 1.0]), np.array([0.1, 1.0])) == 1     # [0, 2] then [4.8, 5.2]: none
    order = arena.slope_order(["dcg", "sips", "dcg", "rips"], [np.inf, 10.0, 10.0, np.inf], [0.1, 0.5, 0.2, 0.3])
    assert list(order) == [1, 3, 0, 2]           # SIPS, RIPS, then DCG unclipped before clipped


def test_selection_regret_follows_from_the_records(run):
    """SLOPE's, the smallest SE's, the smallest plug-in MSE's, the rival's own log's and
    cross-validation's picks recomputed log by log from the records (the plug-in: SE² + max((V̂ −
    V̂_SIPS)² − SE_SIPS², 0), SIPS unclipped; the rival's log: the smallest (rival estimate − the
    rival log's mean)²; cross-validation: the smallest error plus its SE), their relative MSE and
    the best variant's."""
    report = importlib.import_module("simrec_studies.arena.report")
    estimated, on_policy, validated = report.ESTIMATED_MSE, report.ON_POLICY, report.CROSS_VALIDATION
    records = pd.read_csv(run / "records.csv")
    selected = arena.selection(records, arena.winners(records).winner.value_counts().index[0])
    names = ["SLOPE, by assumption", "SLOPE, by SE", "SLOPE over m, DCG", "smallest SE", estimated, on_policy,
             validated]
    assert set(selected.selector) >= set(names)
    truth = records[records.estimator == "truth"]
    picked = selected[selected.selector.isin(names)]
    for _, row in picked.groupby("selector").sample(3, random_state=2).iterrows():
        logs = records[(records.behaviour == row.behaviour) & (records.sessions == row.sessions)
                       & (records.logger == row.logger) & (records.estimator != "truth")]
        true = truth[(truth.behaviour == row.behaviour) & (truth.logger == row.logger)].value.iloc[0]
        errors = []
        for _, log in logs.groupby("replication"):
            log = log[log.value_se > 0].reset_index(drop=True)
            se = log.value_se.to_numpy()
            dcg = np.flatnonzero(log.estimator == "dcg")
            order = {"SLOPE, by assumption": arena.slope_order(log.estimator, log.m, se),
                     "SLOPE, by SE": np.argsort(-se, kind="stable"),
                     "SLOPE over m, DCG": dcg[np.argsort(-log.m.to_numpy()[dcg])]}.get(row.selector)
            if row.selector == estimated:
                ref = int(np.flatnonzero((log.estimator == "sips") & np.isinf(log.m))[0])
                v = log.value.to_numpy()
                i = int(np.argmin(se ** 2 + np.maximum((v - v[ref]) ** 2 - se[ref] ** 2, 0.0)))
            elif row.selector == on_policy:
                assert log.rival_log.nunique() == 1                       # one rival log per replication and N
                i = int(np.nanargmin((log.rival_value - log.rival_log) ** 2))
            elif row.selector == validated:                               # the one-standard-error rule
                i = int(np.nanargmin(log.cv_error + log.cv_error_se))
            else:
                i = int(np.argmin(se)) if order is None else arena.slope_choice(log.value.to_numpy(), se, order)
            errors.append(((log.value[i] - true) / true) ** 2)
        assert row["relative MSE"] == pytest.approx(np.mean(errors))
        assert row.regret == pytest.approx(row["relative MSE"] - row["best relative MSE"])
        dcg = logs[logs.estimator == "dcg"]
        assert row["best DCG relative MSE"] == pytest.approx(
            (((dcg.value - true) / true) ** 2).groupby(dcg.m).mean().min())


def test_the_best_selector_from_the_log_is_counted_from_the_selection_table(run):
    """The README names, per (behaviour, N), the selector (not the fixed variant) with the smallest
    median multiple of the best variant's relative MSE, counted over the pairs."""
    table = pd.read_csv(run / "table_selection.csv")
    table = table[~table.selector.str.startswith("fixed: ")].assign(
        ratio=lambda t: t["relative MSE"] / t["best relative MSE"])
    medians = table.groupby(["behaviour", "sessions", "selector"]).ratio.median()
    best = medians.groupby(level=["behaviour", "sessions"]).apply(lambda m: m.droplevel([0, 1]).idxmin())
    counts = sorted(best.value_counts().items(), key=lambda item: (-item[1], item[0]))
    text = (run / "README.md").read_text()
    expected = "; ".join(f"{name} in {n}" for name, n in counts)
    assert f"over the {len(best)} pairs of behaviour and log size: {expected}." in text


def test_cross_validation_against_slope_is_counted_from_the_per_log_picks(run):
    """The claim on cross-validation against SLOPE (by assumption) recounted from the picks of each
    log at the largest N: per setting, the paired differences of the chosen relative squared errors,
    beyond 2 SE either way or a tie; and each pick's error is that of the variant it names."""
    report = importlib.import_module("simrec_studies.arena.report")
    records = pd.read_csv(run / "records.csv")
    picks = report.selected(records, "DCG (clipped IPS), m = 10")
    sq = report._squared_errors(records).assign(name=lambda t: [report.variant(e, m) for e, m in zip(t.estimator, t.m)])
    merged = picks.merge(sq[[*report.SETTING, "replication", "name", "relative_squared_error"]],
                         left_on=[*report.SETTING, "replication", "chosen"],
                         right_on=[*report.SETTING, "replication", "name"], suffixes=("", "_of_variant"))
    assert len(merged) == len(picks)
    np.testing.assert_allclose(merged.relative_squared_error, merged.relative_squared_error_of_variant, rtol=1e-12)
    last = picks[picks.sessions == max(TINY.sessions)]
    counts = {"lower": 0, "higher": 0, "tie": 0}
    for _, g in last.groupby(report.SETTING):
        paired = g.pivot_table(index="replication", columns="selector", values="relative_squared_error")
        gap = (paired["SLOPE, by assumption"] - paired[report.CROSS_VALIDATION]).to_numpy()
        z = gap.mean() / (gap.std(ddof=1) / np.sqrt(len(gap))) if gap.std() > 0 else 0.0
        counts["lower" if z > 2 else "higher" if z < -2 else "tie"] += 1
    claims = pd.read_csv(run / "table_claims.csv")
    row = claims[claims.source == "Cief et al. AAAI'25"].iloc[0]
    assert row.ours.startswith(f"smaller relative squared error of the chosen estimate beyond 2 SE in "
                               f"{counts['lower']} of {sum(counts.values())} settings, larger in {counts['higher']}")


def test_cross_validations_choices_and_its_validators_median_are_read_from_the_records(run):
    """The README's line on cross-validation: its most frequent choice counted from the per-log
    picks, and unclipped SIPS's median ratio to the truth at the largest N recomputed."""
    report = importlib.import_module("simrec_studies.arena.report")
    records = pd.read_csv(run / "records.csv")
    won = arena.winners(records).winner.value_counts().index[0]
    chosen = report.selected(records, won).query("selector == @report.CROSS_VALIDATION").chosen.value_counts()
    truth = records[records.estimator == "truth"].set_index(["behaviour", "catalogue", "logger", "exploration"]).value
    sips = records[(records.estimator == "sips") & np.isinf(records.m) & (records.sessions == max(TINY.sessions))]
    ratio = sips.value.to_numpy() / truth.loc[list(zip(sips.behaviour, sips.catalogue, sips.logger,
                                                       sips.exploration))].to_numpy()
    text = (run / "README.md").read_text()
    assert f"Cross-validation chooses most often {chosen.index[0]} on {chosen.iloc[0]:,} logs" in text
    assert f"its median estimate is {np.median(ratio):.2f} of the truth for 6 items" in text


def test_the_rivals_own_logs_average_to_its_truth(run):
    """``rival_log``, the mean reward of the rival's own log of N sessions, is an on-policy mean: over
    the replications it lies within 4 SE of the rival's exact value in every cell (the seed is
    fixed), and ``rival_value`` of the truth row is that exact value (target − difference)."""
    records = pd.read_csv(run / "records.csv")
    keys = ["behaviour", "catalogue", "logger", "exploration"]
    truth = records[records.estimator == "truth"].set_index(keys)
    np.testing.assert_allclose(truth.rival_value, truth.value - truth.difference, rtol=1e-12)
    logs = records[(records.estimator == "dcg") & (records.sessions == max(TINY.sessions))]
    per_log = logs.groupby([*keys, "replication"]).rival_log.agg(["first", "nunique"])
    assert (per_log["nunique"] == 1).all()
    summary = per_log["first"].groupby(level=keys).agg(["mean", "std", "size"])
    z = (summary["mean"] - truth.rival_value.reindex(summary.index)) / (summary["std"] / np.sqrt(summary["size"]))
    assert (z.abs() <= 4).all(), z


def test_training_sizes_balance_the_two_sides_variances():
    """n_train = n · SE_v² / (SE_v² + SE_val²), rounded, within [2, n − 2]; one half where both are
    0; 0 for an undefined variant."""
    sizes = CELLS.training_sizes(np.array([1.0, 3.0, 0.0, 1e-3, 1e3, np.nan]), 1.0, 100)
    np.testing.assert_array_equal(sizes, [50, 90, 2, 2, 98, 0])
    np.testing.assert_array_equal(CELLS.training_sizes(np.zeros(2), 0.0, 10), [5, 5])


def test_cross_validation_error_is_the_mse_at_the_training_size_plus_the_validators_variance():
    """Monte Carlo: a variant's expected cross-validation error is its MSE on n_train sessions plus
    the validator's variance on the other n − n_train, E[(V̂_train − V̂_val)²] = b² + σ²/n_train +
    σ_val²/(n − n_train): an unbiased and a biased variant of one mean over 4,000 logs (fixed seed),
    within 4 SE; each error's SE is the splits' spread over √S."""
    rng = np.random.default_rng(0)
    n, splits, logs, bias = 60, 5, 4_000, 0.3
    sizes = np.array([20, 40])
    mean_error = []
    for _ in range(logs):
        terms, validator = rng.normal(1.0, 1.0, n), rng.normal(1.0, 2.0, n)
        ranks = np.stack([rng.permutation(n) for _ in range(splits)])
        training = ranks[None] < sizes[:, None, None]
        values = np.stack([(training[0] * terms).sum(-1) / sizes[0],
                           (training[1] * terms).sum(-1) / sizes[1] + bias])
        errors = CELLS.cross_validation_errors(values, validator, training)
        want = ((values - (~training * validator).sum(-1) / (n - sizes)[:, None]) ** 2)
        np.testing.assert_allclose(errors, [want.mean(-1), want.std(-1, ddof=1) / np.sqrt(splits)], rtol=1e-12)
        mean_error.append(errors[0])
    mean_error = np.array(mean_error)
    expected = np.array([0.0, bias ** 2]) + 1.0 / sizes + 4.0 / (n - sizes)
    z = (mean_error.mean(0) - expected) / (mean_error.std(0, ddof=1) / np.sqrt(logs))
    assert (np.abs(z) <= 4).all(), z
    undefined = CELLS.cross_validation_errors(np.array([[np.nan, 1.0, np.nan]]), np.ones(4),
                                              np.array([[[1, 1, 0, 0]] * 3], bool))
    assert np.isnan(undefined).all()                     # one defined split: no standard error


def test_cross_validation_scores_each_variant_on_its_own_splits_by_brute_force(run):
    """`cross_validate` on one arena log against a brute force: the same permutations, each
    variant's estimate recomputed split by split (`summarise` of the restricted contributions; the
    pooled AIPS choosing its behaviour on the training sessions themselves, computed on them by the
    registry) and unclipped SIPS on the held-out ones; and the records carry what it returns."""
    config = dataclasses.replace(TINY, behaviours=("mixed",))
    shared = CELLS.setup(jax.random.key(0), config)
    w = shared.worlds[6, config.group_sizes[0], 1.0]
    scene = CELLS.scenario(config, "mixed", w)
    logger = feed.Policy(feed.all_items(6), CELLS.logging_ranker("plackett_luce", 1.0, w.logger_scores),
                         config.feed_length)
    target = feed.Policy(feed.all_items(6), CELLS.target_ranker(config, w.target_scores), config.feed_length)
    log = feed.simulate(jax.random.key(1), scene, logger, 400)
    on = ope.from_log(log, {"R0": logger, "T": target}, feed.position_model(scene.view), slates=True,
                      context_behaviours=CELLS.context_behaviours(config, "mixed"), item_groups=w.item_groups)
    data, targets = on.data["click"], {"T": on.targets["click"]["T"]}
    m = np.asarray(config.m)
    rows = np.arange(100, 400)                                   # a log inside a longer one, as a replication
    parts = ope.restrict({k: c for k, c in ope.contributions(data, targets, m).items()
                          if not ope.ESTIMATORS[k[0]].pooled}, rows)
    parts.update(ope.contributions(*ope.subset(data, targets, rows), m, estimators=["aips_chosen"]))
    summary = ope.summarise(parts, m)
    found = {name: CELLS.Estimates(summary[name, "T"]["value"], summary[name, "T"]["value_se"],
                                   *[np.zeros(len(m))] * 4) for name, _ in parts}
    key = jax.random.key(7)
    got = CELLS.cross_validate(key, 4, data, targets, parts, found, rows, m)
    ranks = np.asarray(jax.vmap(lambda k: jax.random.permutation(k, len(rows)))(jax.random.split(key, 4)))
    sips_se = found["sips"].value_se[-1]
    for name in ("dcg", "sndcg", "dcg_beta", "snsips", "aips_chosen"):
        sizes = CELLS.training_sizes(found[name].value_se, sips_se, len(rows))
        for i in range(len(m)):
            squared = []
            for r in ranks:
                train, held = np.flatnonzero(r < sizes[i]), np.flatnonzero(r >= sizes[i])
                if name == "aips_chosen":
                    value = ope.summarise(ope.contributions(*ope.subset(data, targets, rows[train]), m,
                                                            estimators=[name]), m)[name, "T"]["value"][i]
                else:
                    ratio = parts[name, "T"].denominator
                    if ratio is not None and not (ratio[i][..., train].mean(-1) > 0).all():
                        continue                                  # undefined on this split
                    value = ope.summarise(ope.restrict({(name, "T"): parts[name, "T"]}, train), m)[name, "T"][
                        "value"][i]
                reference = parts["sips", "T"].numerator[-1][held].mean()
                squared.append((value - reference) ** 2)
            squared = np.array(squared)
            want = ([squared.mean(), squared.std(ddof=1) / np.sqrt(len(squared))] if len(squared) >= 2
                    else [np.nan, np.nan])
            np.testing.assert_allclose(got[name][:, i], want, rtol=1e-8, err_msg=f"{name}, m = {m[i]}")
    records = pd.read_csv(run / "records.csv")
    scored = records[records.estimator != "truth"]
    assert scored.cv_error.notna().any() and (scored.cv_error_se[scored.cv_error.notna()] >= 0).all()
    assert records[records.estimator == "truth"][["cv_error", "cv_error_se"]].isna().all().all()


def test_outputs_and_manifest(run):
    assert json.loads((run / "manifest.json").read_text())["study"] == "arena"
    for name in ("table_errors", "table_winners", "table_winner_map", "table_differences",
                 "table_difference_winners", "table_selection", "table_claims"):
        assert (run / f"{name}.csv").exists() and (run / f"{name}.md").exists()
    assert (run / "fig_mse_minf.png").exists() and (run / "fig_mse_m10.png").exists()
    assert (run / "fig_power_minf.png").exists()
    readme = (run / "README.md").read_text()
    assert "relative MSE" in readme and "## Claims" in readme


@pytest.mark.parametrize("change, message", [
    ({"behaviours": ("nope",)}, "behaviours"), ({"catalogues": ()}, "catalogues"),
    ({"feed_length": 7}, "feed_length"), ({"temperatures": (0.0,)}, "temperatures"),
    ({"epsilons": (0.0,)}, "epsilons"), ({"temperatures": (), "epsilons": ()}, "both empty"),
    ({"m": (0.5,)}, "m"), ({"replications": 1}, "replications"), ({"sessions": (5, 5)}, "sessions"),
    ({"confidence": 1.0}, "confidence"), ({"rival_noise": -1.0}, "rival_noise"),
    ({"satiated_share": 1.5}, "satiated_share"), ({"group_sizes": ()}, "group_sizes"),
    ({"group_sizes": (0,)}, "group_sizes"), ({"direct_effects": (1.5,)}, "direct_effects"),
    ({"cv_splits": 1}, "cv_splits"), ({"sessions": (3, 1_000)}, "sessions")])
def test_bad_configs_are_one_line_errors(change, message):
    with pytest.raises(ConfigError, match=message):
        dataclasses.replace(TINY, **change)


def test_a_self_normalised_estimate_without_weight_is_undefined_not_an_error():
    """SN-SIPS on logs where no ranking is one the target shows: every weight 0, the ratio undefined
    (NaN) at that m; defined elsewhere; a mean estimator is never NaN."""
    numerator = np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 0.0]])
    weights = np.array([[0.0, 0.0, 0.0], [1.0, 1.0, 0.5]])
    m = np.array([1.0, np.inf])
    rival = ope.Contribution(np.ones((2, 3)), np.ones((2, 3)))
    found = arena.estimate(ope.Contribution(numerator, weights), rival, m)
    assert np.isnan(found.value[0]) and found.value[1] == pytest.approx(3.0 / 2.5)
    assert np.isnan(found.difference[0]) and found.difference[1] == pytest.approx(3.0 / 2.5 - 1.0)
    mean = arena.estimate(ope.Contribution(numerator), ope.Contribution(np.ones((2, 3))), m)
    assert mean.value == pytest.approx([0.0, 1.0]) and mean.difference == pytest.approx([-1.0, 0.0])


def test_mips_beside_dcg_names_where_its_groups_bias_offsets_the_behaviours():
    """`_mips_lines`: the median relative bias of MIPS and DCG per behaviour; a behaviour where DCG's
    bias has the opposite sign of MIPS's own (position-based) one and MIPS's is the smaller is named
    as an offset, not a win; one where both have the same sign is not."""
    report = importlib.import_module("simrec_studies.arena.report")
    rows = [("position_based", "mips", -0.08), ("position_based", "dcg", 0.0), ("click_stops", "mips", 0.02),
            ("click_stops", "dcg", 0.13), ("satiation", "mips", -0.2), ("satiation", "dcg", -0.1)]
    table = pd.DataFrame([{"behaviour": b, "estimator": e, "bias": bias, "truth": 1.0} for b, e, bias in rows])
    text = report._mips_lines(arena.PRESETS["default"], table)[1]
    assert "position_based MIPS -0.080, DCG +0.000" in text and "bias it by -0.080" in text
    assert "Under click_stops DCG's bias has the opposite sign" in text and "satiation DCG's" not in text


def test_a_world_without_direct_effect_gives_a_groups_items_one_click_probability():
    """`world` at direct effect 0: the items of a group share their click probabilities (MIPS's
    assumption exactly); at 0.5 they differ by half their deviation's logit; at 1 the world is the
    default one bit for bit; the groups and the noise draws are the same at every direct effect."""
    key = shared_key(jax.random.key(0), "world:20")
    drawn = arena.world(key, TINY, 20, 4)
    np.testing.assert_array_equal(drawn.quality, arena.world(key, TINY, 20, 4, 1.0).quality)
    flat, half = arena.world(key, TINY, 20, 4, 0.0), arena.world(key, TINY, 20, 4, 0.5)
    np.testing.assert_array_equal(flat.item_groups, drawn.item_groups)
    logit = {name: np.log(w.quality / (1 - w.quality)).astype(np.float64) for name, w in
             (("flat", flat), ("half", half), ("drawn", drawn))}
    for group in np.unique(drawn.item_groups):
        members = drawn.item_groups == group
        assert members.sum() >= 1
        np.testing.assert_allclose(flat.quality[:, members], flat.quality[:, members][:, :1].repeat(members.sum(), 1),
                                   rtol=1e-5)
        np.testing.assert_allclose(logit["half"][:, members], (logit["flat"][:, members] + logit["drawn"][:, members]) / 2,
                                   atol=2e-4)
    # the score noise is the same draw: scores minus logit agree across direct effects
    np.testing.assert_allclose(flat.logger_scores - logit["flat"], drawn.logger_scores - logit["drawn"], atol=2e-4)


@pytest.fixture(scope="module")
def mips_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("out") / "arena_mips"
    config = dataclasses.replace(TINY, behaviours=("position_based",), catalogues=(12,), group_sizes=(1, 3),
                                 direct_effects=(0.0, 1.0), temperatures=(1.0,), epsilons=())
    runner.run(arena.STUDY, config, seed=0, out=out, preset="smoke", progress=False)
    return out, config


def test_the_mips_dial_writes_its_table_figure_and_claims(mips_run):
    """Several MIPS worlds: `table_mips` holds MIPS beside DCG per setting, equal to DCG at one item per
    group (singleton groups make MIPS DCG); `fig_mips` is drawn; the two claims where MIPS's
    assumption holds are set beside the paper; the other figures and claims show the base world."""
    out, _ = mips_run
    mips = pd.read_csv(out / "table_mips.csv")
    worlds = mips[["group_size", "direct_effect"]].drop_duplicates()
    assert len(worlds) == 4 and (out / "fig_mips.png").exists()
    singleton = mips[mips.group_size == 1]
    np.testing.assert_allclose(singleton["MIPS relative MSE"], singleton["DCG relative MSE"], rtol=1e-9)
    assert set(mips["MIPS vs DCG"]) <= {"lower", "higher", "tie"}
    claims = pd.read_csv(out / "table_claims.csv", keep_default_na=False)
    dial = claims[claims.evidence.str.startswith("table_mips")]
    assert len(dial) == 2 and dial.claim.str.contains("unbiased").iloc[0]
    assert all(" of 1 settings" in ours for ours in dial.ours)     # e = 0, 3 per group, one logger, largest N
    base = claims[claims.claim.str.contains("holds only approximately")]
    assert len(base) == 1
    readme = (out / "README.md").read_text()
    assert "MIPS's assumption dialled" in readme and "e = 0:" in readme


def test_a_plackett_luce_logger_without_exact_exposures_is_refused_early():
    """`setup` refuses a catalogue whose Plackett–Luce exposures would be a Monte Carlo estimate
    (A · K above the exponential race's limit), naming the fix; the paper preset's largest catalogue
    passes, and the ε-greedy logger alone has no such limit."""
    large = dataclasses.replace(TINY, catalogues=(1_500,), group_sizes=(1_500,))      # one MIPS group: no k-means work
    with pytest.raises(ConfigError, match="catalogues: the Plackett–Luce logger"):
        arena.setup(jax.random.key(0), large)
    assert arena.setup(jax.random.key(0), dataclasses.replace(large, temperatures=())).worlds
    paper = arena.PRESETS["paper"]
    largest = max(paper.catalogues)
    assert arena.setup(jax.random.key(0), dataclasses.replace(paper, catalogues=(largest,),
                                                              group_sizes=(largest,))).worlds


def test_a_plackett_luce_targets_truth_is_exact_by_rank_and_monte_carlo_with_the_items_above():
    """`truth`: a deterministic target's value is exact under every behaviour; a Plackett–Luce
    target's is exact (SE 0) under the position-based behaviour, within 4 SE of a Monte Carlo
    estimate, and a Monte Carlo mean with SE > 0 under click-stops, within 3 SE of a reference of
    twice the samples."""
    config = dataclasses.replace(TINY, catalogues=(20,), target_temperature=0.7, truth_samples=2_000)
    w = arena.world(jax.random.key(0), config, 20, 3)
    target = feed.Policy(feed.all_items(20), CELLS.target_ranker(config, w.target_scores), config.feed_length)
    sort = feed.Policy(feed.all_items(20), CELLS.target_ranker(dataclasses.replace(config, target_temperature=0.0),
                                                           w.target_scores), config.feed_length)
    position_based, click_stops = (CELLS.scenario(config, b, w) for b in ("position_based", "click_stops"))
    for scene in (position_based, click_stops):
        value, se = CELLS.truth(jax.random.key(1), config, scene, sort)
        assert se == 0.0 and value == pytest.approx(float(feed.online_value(None, scene, sort).mean[0]))
    value, se = CELLS.truth(jax.random.key(1), config, position_based, target)
    sampled = feed.online_value(jax.random.key(2), position_based, target, num_samples=4_000)
    assert se == 0.0 and abs(value - sampled.mean[0]) <= 4 * sampled.standard_error[0]
    value, se = CELLS.truth(jax.random.key(1), config, click_stops, target)
    reference = feed.online_value(jax.random.key(3), click_stops, target, num_samples=4_000)
    assert se > 0 and abs(value - reference.mean[0]) <= 3 * np.hypot(se, reference.standard_error[0])


@pytest.fixture(scope="module")
def pl_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("out") / "arena_pl"
    config = dataclasses.replace(TINY, target_temperature=0.7, truth_samples=1_000, temperatures=(1.0,), epsilons=())
    runner.run(arena.STUDY, config, seed=0, out=out, preset="smoke", progress=False)
    return out, config


def test_plackett_luce_targets_are_scored_against_their_truth_with_its_noise_checked(pl_run):
    """With Plackett–Luce targets the truth rows carry their Monte Carlo SE (0 under the
    position-based behaviour), `table_truth` compares it with the estimators' RMSE, and unclipped
    DCG, unbiased for a position-based user, averages to the exact truth within 3 SE over the logs."""
    out, config = pl_run
    records = pd.read_csv(out / "records.csv")
    truth = records[records.estimator == "truth"].set_index("behaviour")
    assert truth.loc["position_based", "value_se"] == 0.0 and truth.loc["mixed", "value_se"] > 0.0
    check = pd.read_csv(out / "table_truth.csv")
    assert (check["truth SE / smallest RMSE"] >= 0).all() and "Monte Carlo mean in" in (out / "README.md").read_text()
    dcg = records[(records.estimator == "dcg") & np.isinf(records.m) & (records.behaviour == "position_based")
                  & (records.sessions == max(config.sessions))]
    assert abs(dcg.value.mean() - truth.loc["position_based", "value"]) <= 3 * dcg.value.std(ddof=1) / np.sqrt(len(dcg))
