"""The open_bandit study on an Open-Bandit-like folder the test writes, with a planted
position-based click model, so every estimate has an exact value to be checked against: a
uniform logger and a fixed (time-constant) non-uniform "bts" logger, clicks
Bernoulli(q[a] · e[k]). Also its smoke run through the runner, its skip when the data is absent,
and its configuration."""
import dataclasses
import json
import warnings

import jax
import numpy as np
import pandas as pd
import pytest

from simrec import runner
from simrec import datafiles as _data
from simrec_studies import open_bandit
from tests.test_obp import fake_log, write_open_bandit

N_ITEMS, ROWS = 8, 6000
QUALITY = np.linspace(0.04, 0.3, N_ITEMS)                  # q[a]
EXAMINATION = np.array([1.0, 0.6, 0.35])                  # e[k], relative examination
BTS = np.stack([np.exp(3 * QUALITY * s) / np.exp(3 * QUALITY * s).sum() for s in (4, 2, 1)])  # π(a, k)
UNIFORM = np.full((3, N_ITEMS), 1 / N_ITEMS)
RATES = EXAMINATION[:, None] * QUALITY[None, :]           # click probability of (k, a)
TRUTH = {"random": (UNIFORM * RATES).sum(axis=1), "bts": (BTS * RATES).sum(axis=1)}   # per position


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    rng = np.random.default_rng(7)
    for policy, pi in (("random", UNIFORM), ("bts", BTS)):
        write_open_bandit(root / "open-bandit-sample", policy, "men",
                          fake_log(rng, ROWS, N_ITEMS, pi, RATES), N_ITEMS)
    return root


@pytest.fixture(scope="module")
def run(folder, tmp_path_factory):
    out = tmp_path_factory.mktemp("out") / "open_bandit"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(_data.DATA_ENV, str(folder))
        runner.run(open_bandit.STUDY, open_bandit.PRESETS["smoke"], seed=0, out=out, preset="smoke",
                   progress=False)
    return out


def test_smoke_run_writes_tables_figure_and_readme(run):
    assert json.loads((run / "manifest.json").read_text())["study"] == "open_bandit"
    assert (run / "fig_estimates.png").exists()
    for name in ("table_estimates", "table_positions", "table_position_bias", "table_data"):
        for suffix in ("csv", "md", "tex"):
            assert (run / f"{name}.{suffix}").exists()
    estimates = pd.read_csv(run / "table_estimates.csv")
    names = {open_bandit.IPS, open_bandit.SNIPS, open_bandit.DR,
             *(open_bandit.clip_name(c) for c in open_bandit.PRESETS["smoke"].clip)}
    assert set(zip(estimates.target, estimates.estimator)) == {(t, e) for t in open_bandit.POLICIES for e in names}
    assert (estimates.low <= estimates.estimate).all() and (estimates.estimate <= estimates.high).all()
    positions = pd.read_csv(run / "table_positions.csv")
    assert set(positions.position) == {1, 2, 3} and len(positions) == 3 * len(estimates)
    readme = (run / "README.md").read_text()
    assert "How the target's action probabilities were obtained" in readme and "Verdict" in readme


def test_estimates_recover_the_planted_click_rates(run):
    """Every unclipped estimator within 4 standard errors of the exact click rate of the target
    (the planted model satisfies the position-based model and the bts logger is time-constant,
    so the empirical-distribution target is right up to its own sampling noise), overall and per
    position; and the on-policy rates within 4 SE of their exact values."""
    records = pd.read_csv(run / "records.csv")
    on = records[records.part == "on-policy"]
    for r in on.itertuples():
        exact = TRUTH[r.target].mean() if r.position == -1 else TRUTH[r.target][r.position]
        assert abs(r.value - exact) <= 4 * r.se
    est = records[(records.part == "estimate") & records.estimator.isin(
        [open_bandit.IPS, open_bandit.SNIPS, open_bandit.DR])]
    assert len(est) == 2 * 3 * 4
    for r in est.itertuples():
        exact = TRUTH[r.target].mean() if r.position == -1 else TRUTH[r.target][r.position]
        # the bts target is the empirical distribution π̂ of its own log (ROWS / 3 rows per
        # position): sum_a π̂(a, k) r(k, a) has variance Var_π(r_k) / n_k, independent of the estimate
        per_position = (BTS * (RATES - TRUTH["bts"][:, None]) ** 2).sum(axis=1) / (ROWS / 3)
        target_var = 0.0 if r.target == "random" else (
            per_position.sum() / 9 if r.position == -1 else per_position[r.position])
        assert abs(r.value - exact) <= 4 * np.sqrt(r.se ** 2 + target_var), (r.target, r.estimator, r.position)


def test_clipped_ips_matches_its_closed_form_bias(run):
    """Clipped IPS of the uniform target on the bts log has mean
    sum_a (1/I) · min(m, 1/π(a, k)) · π(a, k) · r(k, a) at position k (m = clip · I), below the truth."""
    records = pd.read_csv(run / "records.csv")
    for clip in open_bandit.PRESETS["smoke"].clip:
        expected = (UNIFORM * np.minimum(clip * N_ITEMS, 1 / BTS) * BTS * RATES).sum(axis=1)
        rows = records[(records.estimator == open_bandit.clip_name(clip)) & (records.target == "random")]
        for r in rows.itertuples():
            mean = expected.mean() if r.position == -1 else expected[r.position]
            assert abs(r.value - mean) <= 4 * r.se, (clip, r.position)
    assert (UNIFORM * np.minimum(N_ITEMS, 1 / BTS) * BTS * RATES).sum() < TRUTH["random"].sum() - 0.01


def test_position_bias_of_the_randomised_log_recovers_the_planted_examination(run):
    bias = pd.read_csv(run / "table_position_bias.csv")
    rows = bias[bias.log == "random"].set_index("position")
    assert rows.loc[1, "relative click rate"] == rows.loc[1, "low"] == rows.loc[1, "high"] == 1.0
    for k in (2, 3):
        # the interval is at 95 %: 4 SE on the log scale is its half-width x 4 / 1.96
        low, high = rows.loc[k, "low"], rows.loc[k, "high"]
        half = (np.log(high) - np.log(low)) / 2 * 4 / 1.96
        assert abs(np.log(rows.loc[k, "relative click rate"]) - np.log(EXAMINATION[k - 1])) <= half


def test_estimates_and_on_policy_rates_equal_their_formulas(folder, monkeypatch):
    """Every estimate of `estimates` and `on_policy` against numpy on the rounds of each subset:
    IPS mean c·w, clipped mean c·min(m, 1/p₀)·π_T, SNIPS Σ c·w / Σ w with its delta-method SE
    over the subset's n rounds, DR Σ_a π_T q̂ + w (c − q̂), the on-policy mean click."""
    monkeypatch.setenv(_data.DATA_ENV, str(folder))
    config = open_bandit.PRESETS["smoke"]
    logs = open_bandit.load(config, "men")
    feedback, log = logs["bts"]
    pi = open_bandit.target_table("random", logs["random"][0], 3)
    key = jax.random.key(4)
    records = pd.DataFrame(open_bandit.estimates(key, config, "men", "random", feedback, log, pi)
                           + open_bandit.on_policy("men", "bts", feedback, 3)).set_index(["estimator", "position"])
    position, action, c = feedback["position"], feedback["action"], feedback["reward"].astype(float)
    p0, target = feedback["pscore"], pi[feedback["position"], feedback["action"]]
    w = target / p0
    fold, q = open_bandit.reward_model(key, config, feedback, 3)
    dr = (pi[None] * q).sum(axis=2)[fold, position] + w * (c - q[fold, position, action])

    def mean_se(values, use):
        return values[use].mean(), values[use].std(ddof=1) / np.sqrt(use.sum())

    for k in (-1, 0, 1, 2):
        use = np.ones(len(c), bool) if k == -1 else position == k
        ratio = (c * w)[use].sum() / w[use].sum()
        influence = (c * w - ratio * w) / w[use].mean()
        expected = {open_bandit.IPS: mean_se(c * w, use), open_bandit.DR: mean_se(dr, use),
                    open_bandit.SNIPS: (ratio, influence[use].std(ddof=1) / np.sqrt(use.sum())),
                    open_bandit.ON_POLICY: mean_se(c, use),
                    **{open_bandit.clip_name(m): mean_se(c * np.minimum(m * len(pi[0]), 1 / p0) * target, use)
                       for m in config.clip}}
        for name, (value, se) in expected.items():
            row = records.loc[(name, k)]
            assert row.value == pytest.approx(value, rel=1e-5) and row.se == pytest.approx(se, rel=1e-5), (name, k)


def test_target_table_and_cross_fitted_reward_model():
    rng = np.random.default_rng(0)
    n = 400
    feedback = {"n_rounds": n, "n_actions": 4, "position": rng.integers(0, 2, n), "action": rng.integers(0, 4, n),
                "reward": (rng.random(n) < 0.3).astype(int)}
    pi = open_bandit.target_table("bts", feedback, 2)
    for k in range(2):
        np.testing.assert_allclose(pi[k], np.bincount(feedback["action"][feedback["position"] == k], minlength=4)
                                   / np.sum(feedback["position"] == k))
    np.testing.assert_allclose(open_bandit.target_table("random", feedback, 2), 0.25)
    config = dataclasses.replace(open_bandit.PRESETS["smoke"], folds=3, prior_rounds=5.0)
    fold, tables = open_bandit.reward_model(jax.random.key(1), config, feedback, 2)
    assert tables.shape == (3, 2, 4) and set(fold) == {0, 1, 2}
    for f in range(3):                                          # brute force, one cell at a time
        train = fold != f
        for k in range(2):
            at_k = train & (feedback["position"] == k)
            rate = feedback["reward"][at_k].mean()
            for a in range(4):
                cell = at_k & (feedback["action"] == a)
                expected = (feedback["reward"][cell].sum() + 5.0 * rate) / (cell.sum() + 5.0)
                assert tables[f, k, a] == pytest.approx(expected)


def test_the_study_skips_cleanly_without_the_data(tmp_path, monkeypatch):
    monkeypatch.setenv(_data.DATA_ENV, str(tmp_path / "nothing"))
    config = open_bandit.PRESETS["smoke"]
    with pytest.warns(_data.MissingDataWarning, match="open-bandit-sample/random/men/men.csv.gz not found"):
        assert open_bandit.cells(config) == []
    report = open_bandit.report(config, pd.DataFrame(columns=list(open_bandit.COLUMNS)))
    assert "open-bandit-sample skipped" in report.summary and not report.tables
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert open_bandit.cells(dataclasses.replace(config, folder="")) == []


def test_every_config_field_says_what_it_means():
    assert all(meaning for _, _, _, meaning in runner.config_help(open_bandit.PRESETS["default"]))
    with pytest.raises(ValueError, match="campaigns must be one of"):
        open_bandit.OpenBanditConfig(campaigns=("kids",))
    with pytest.raises(ValueError, match="clip must hold finite factors > 0"):
        open_bandit.OpenBanditConfig(clip=(0.0,))
    with pytest.raises(ValueError, match="folds"):
        open_bandit.OpenBanditConfig(folds=1)


def test_position_bias_standard_error_matches_monte_carlo():
    """The delta-method SE of log(CTR_k / CTR_1) against the spread of 2,000 simulated logs."""
    rng = np.random.default_rng(3)
    n, rates = 3000, np.array([0.02, 0.012])
    logs = [(np.repeat([0, 1], n), np.concatenate([rng.random(n) < rates[0], rng.random(n) < rates[1]]))
            for _ in range(2000)]
    rows = [open_bandit.position_bias("c", "random", {"position": p, "reward": c}, 2)[1] for p, c in logs]
    log_ratio = np.log([r["value"] for r in rows])
    se = np.array([r["se"] for r in rows])
    # the SD of 2,000 draws is known to about 1/sqrt(2 * 2000) = 1.6 % relative; allow 4 of those
    assert abs(log_ratio.std(ddof=1) / np.median(se) - 1) < 4 * np.sqrt(1 / 4000) + 0.02
    assert abs(log_ratio.mean() - np.log(rates[1] / rates[0])) < 4 * log_ratio.std() / np.sqrt(2000) + 0.01


def test_comparison_flags_use_both_intervals():
    config = open_bandit.PRESETS["smoke"]
    base = {"campaign": "men", "logger": "bts", "target": "random", "position": -1, "n": 100, "clicks": 5}
    records = pd.DataFrame([
        dict(base, part="estimate", estimator="IPS", value=0.010, se=0.001),
        dict(base, part="estimate", estimator="DR", value=0.016, se=0.001),
        dict(base, part="estimate", estimator="SNIPS", value=0.0125, se=0.001),
        dict(base, part="on-policy", estimator="on-policy", logger="random", value=0.012, se=0.001)])
    table = open_bandit.comparison(config, records).set_index("estimator")
    z = config.z
    # IPS: difference -0.002, SE sqrt(2)·0.001 -> CI covers 0; the truth is outside 0.010 ± 1.96e-3
    assert table.loc["IPS", "agrees"] == "yes" and table.loc["IPS", "truth in CI"] == "no"
    assert table.loc["IPS", "difference low"] == pytest.approx(-0.002 - z * np.sqrt(2) * 0.001)
    # DR: difference +0.004 > 1.96 · sqrt(2) · 0.001 = 0.0028: disagrees; SNIPS: both flags yes
    assert table.loc["DR", "agrees"] == "no" and table.loc["DR", "truth in CI"] == "no"
    assert table.loc["SNIPS", "agrees"] == "yes" and table.loc["SNIPS", "truth in CI"] == "yes"


def test_a_report_only_edit_changes_no_cell_address(tmp_path, monkeypatch):
    """The code version (part of every cell's cache address) covers compute.py and __init__.py,
    not report.py: a copy of the package whose report is edited keeps its code version, one whose
    compute is edited does not."""
    import importlib
    import pathlib
    import sys
    source = pathlib.Path(open_bandit.__file__).parent
    package = tmp_path / "obcopy" / "open_bandit"
    package.mkdir(parents=True)
    (tmp_path / "obcopy" / "__init__.py").write_text("")
    for name in ("__init__", "compute", "report"):
        text = (source / f"{name}.py").read_text().replace("simrec_studies.open_bandit", "obcopy.open_bandit")
        (package / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m.startswith("obcopy")]:
        monkeypatch.delitem(sys.modules, name)
    study = importlib.import_module("obcopy.open_bandit").STUDY
    assert runner.report_module(study) == "obcopy.open_bandit.report"
    modules = runner.module_closure(study.module, ("obcopy", "simrec"), [runner.report_module(study)])
    assert {"obcopy.open_bandit.compute", "obcopy.open_bandit"} <= set(modules)
    assert "obcopy.open_bandit.report" not in modules
    before = runner.code_version(study)
    report = package / "report.py"
    report.write_text(report.read_text().replace("No Open Bandit data", "No Open Bandit logs"))
    assert runner.code_version(study) == before
    compute = package / "compute.py"
    compute.write_text(compute.read_text().replace('OVERALL = -1 ', 'OVERALL = -1  # edited'))
    assert runner.code_version(study) != before
