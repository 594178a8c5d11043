"""The disagreement study (Jeunen et al. KDD'24 App. A) at its smoke preset: outputs, the
inversion statistic against a brute-force pair count, and the fixed-count case where nDCG is DCG
over a constant (no disagreement at all)."""
import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from simrec import runner
from studies import disagreement
from tests.test_stats import brute_inversion_rate


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("disagreement")
    summary = runner.run(disagreement.STUDY, disagreement.PRESETS["smoke"], seed=0, out=out,
                         preset="smoke", progress=False)
    return out, summary


def test_smoke_writes_tables_figures_and_manifest(smoke_run):
    out, summary = smoke_run
    for name in ("table_summary", "table_spread", "table_models"):
        for ext in ("csv", "md", "tex"):
            assert (out / f"{name}.{ext}").exists()
    assert (out / "fig_scatter.png").exists() and (out / "fig_spread.png").exists()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["study"] == "disagreement" and manifest["preset"] == "smoke"
    assert summary.cells_total == 1                  # smoke has no real data: simulated only
    assert "real data disabled" in (out / "README.md").read_text()


def test_summary_statistics_match_brute_force_on_the_model_table(smoke_run):
    out, _ = smoke_run
    config = disagreement.PRESETS["smoke"]
    models = pd.read_csv(out / "table_models.csv")
    summary = pd.read_csv(out / "table_summary.csv").set_index("data")
    n_models = len(config.ease_l2s) + len(config.kunn_ks) ** 2
    assert len(models) == n_models
    dcg, ndcg = models[f"dcg@{config.k}"].to_numpy(), models[f"ndcg@{config.k}"].to_numpy()
    expected = brute_inversion_rate(dcg, ndcg)
    assert summary.loc["simulated", "inversion_rate"] == pytest.approx(expected, abs=1e-9)
    assert summary.loc["simulated", "pearson"] == pytest.approx(np.corrcoef(dcg, ndcg)[0, 1],
                                                                abs=1e-7)


def test_fixed_held_out_count_gives_no_disagreement(smoke_run):
    """Spread 0: every user has exactly held_out_mean held-out items, so nDCG@k = DCG@k / IDCG@k
    with one constant IDCG and the two metrics order the models identically (Jeunen App. A)."""
    out, _ = smoke_run
    spread = pd.read_csv(out / "table_spread.csv").set_index("spread s")
    assert spread.loc[0.0, "sd held-out"] == 0.0
    assert spread.loc[0.0, "inversion_rate"] == 0.0
    assert spread.loc[0.0, "pearson"] == pytest.approx(1.0, abs=1e-9)
    assert spread.loc[1.0, "sd held-out"] > 0


def test_real_data_cell_only_when_the_file_exists(tmp_path):
    config = disagreement.PRESETS["default"]
    missing_file = dataclasses.replace(config, ratings_file="no/such/ratings.csv")
    assert disagreement.cells(missing_file) == [{"data": "simulated"}]
    assert disagreement.cells(dataclasses.replace(config, ratings_file="")) == [{"data": "simulated"}]


@pytest.mark.parametrize("overrides", [{"train_fraction": 1.0}, {"ease_l2s": ()},
                                       {"kunn_ks": (0,)}, {"k": 0},
                                       {"held_out_mean": 50, "held_out_max": 40},
                                       {"spreads": (-1.0,)}])
def test_config_rejects_bad_values(overrides):
    with pytest.raises(ValueError):
        dataclasses.replace(disagreement.PRESETS["default"], **overrides)
