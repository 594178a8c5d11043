"""The position_bias study: config validation, every config field documented, no module-level
state, and a tiny run end to end (records against the declared columns, curves at rank 1, the
true curve in the records equal to the simulator's, tables, figures and README)."""
import dataclasses
import math
import pickle

import numpy as np
import pandas as pd
import pytest

from simrec import feed, runner
from simrec.runner import ConfigError
from simrec_studies import position_bias
from simrec_studies.common import scenarios
from simrec_studies.common.scenarios import NoisyOracle, Trained

#: smaller than the smoke preset: one level, two tiny log sizes, one replication, a small OPE log
#: and fewer EM steps
TINY = dataclasses.replace(position_bias.PRESETS["smoke"], sessions=(200, 800), replications=1, em_iterations=50,
                           scenario=dataclasses.replace(position_bias.PBM_SMOKE, log_sessions=512))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("position_bias") / "tiny"
    summary = runner.run(position_bias.STUDY, TINY, seed=0, out=out, preset="smoke", progress=False)
    return out, summary


def test_every_config_field_is_documented():
    rows = runner.config_help(position_bias.PRESETS["default"])
    top = {key.split(".")[0] for key, *_ in rows}
    assert top == {f.name for f in dataclasses.fields(position_bias.PositionBiasConfig)}
    undocumented = [key for key, _, _, meaning in rows if not key.startswith("scenario.") and not meaning]
    assert not undocumented, undocumented


@pytest.mark.parametrize("change, message", [
    ({"levels": ("level3",)}, "levels must be"),
    ({"signal": "click"}, "signal must be"),
    ({"sessions": (3,)}, "sessions must be"),
    ({"replications": 0}, "replications must be"),
    ({"harvest_rankers": (Trained("r0"),)}, "at least 2 distinct"),
    ({"improving": (Trained("r0"),)}, "distinct rankers"),
    ({"m": (0.5,)}, "m must be a number >= 1 or inf"),
    ({"confidence": 1.0}, "confidence"),
    ({"scenario": scenarios.PRESETS["smoke"], "levels": ("level2",)}, "cascade and satiation must be 0"),
])
def test_config_validation_names_the_field(change, message):
    with pytest.raises(ConfigError, match=message):
        dataclasses.replace(position_bias.PRESETS["smoke"], **change)


def test_cells_cover_levels_replications_and_sizes():
    config = position_bias.PRESETS["default"]
    cells = position_bias.cells(config)
    curves = [c for c in cells if c["part"] == "curves"]
    assert len(curves) == len(config.levels) * config.replications * len(config.sessions)
    assert {c["sessions"] for c in curves} == set(config.sessions)
    assert sum(c["part"] == "truth" for c in cells) == len(config.levels)


def test_tiny_run_records_and_outputs(run):
    out, summary = run
    assert summary.cells_total == len(position_bias.cells(TINY))
    records = pd.read_csv(out / "records.csv", keep_default_na=False,
                          na_values={"m": [""], "value": [""]})
    assert list(records.columns) == list(position_bias.COLUMNS)
    curve = records[records.part == "curve"]
    assert set(curve.estimator) == set(position_bias.ESTIMATORS)
    first = curve[(curve["rank"] == 1) & (curve.statistic == "estimate")]
    assert np.allclose(first.value, 1.0)                                 # relative to rank 1
    # the recorded truth is the simulator's curve of the level's day-0 view model (cached platform)
    (path,) = (out.parent / ".simrec-cache" / "position_bias").glob("setup-*.pkl")
    platform = pickle.loads(path.read_bytes()).platform
    view = scenarios.day(platform, "level1", 0).scenario.view
    truth = curve[(curve.statistic == "truth") & (curve.estimator == "randomisation") & (curve.sessions == 800)]
    expected = np.asarray(feed.view_probability(view, TINY.scenario.level1.feed_length))
    np.testing.assert_allclose(truth.sort_values("rank").value, expected, rtol=1e-6)
    ope = records[records.part == "ope"]
    assert {"true", "ope_views"} <= set(ope.estimator)
    assert ((ope[ope.statistic == "low"].value.to_numpy() <= ope[ope.statistic == "high"].value.to_numpy())).all()
    errors = pd.read_csv(out / "table_curve_error.csv")
    assert (errors.rmse_mean >= 0).all() and set(errors.sessions) == set(TINY.sessions)
    down = pd.read_csv(out / "table_downstream.csv")
    assert set(down.m) == {1.0, math.inf} and ((down.TPR.dropna() >= 0) & (down.TPR.dropna() <= 1)).all()
    assert (down[down.estimator == "true"].abs_error_minus_true == 0).all()     # paired with itself
    assert (down.rmse >= down.bias.abs() - 1e-12).all()
    for name in ("fig_curve_error", "fig_curves", "fig_downstream"):
        assert (out / f"{name}.png").read_bytes().startswith(b"\x89PNG")
    assert np.isfinite(down.bias_se).all() and (down.bias_se >= 0).all()      # SE over the settings (mean_se)
    readme = (out / "README.md").read_text()
    assert "## Claims" in readme and "## Caveats" in readme
    # the verdicts against the true curve follow the 2-SE rule (reporting.verdict)
    assert readme.count("the true curve)") + readme.count("true curve established") >= len(position_bias.DOWNSTREAM)


def test_harvest_rankers_are_typed():
    config = runner.with_overrides(position_bias.PRESETS["smoke"], {"harvest_rankers": "r0,oracle@3"})
    assert config.harvest_rankers == (Trained("r0"), NoisyOracle(3.0))
