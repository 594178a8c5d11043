"""The disagreement study (Jeunen et al. KDD'24 App. A) at its smoke preset: outputs, the
inversion statistic against a brute-force pair count, the fixed-count case where nDCG is DCG
over a constant (no disagreement at all), the claims beside the paper's numbers and the
report-only edit."""
import dataclasses
import importlib
import json

import jax
import numpy as np
import pandas as pd
import pytest

from simrec import missing, reporting, runner
from simrec.world import WorldConfig
from simrec import datafiles as _data
from simrec_studies import disagreement
from tests.test_stats import brute_inversion_rate

report_module = importlib.import_module("simrec_studies.disagreement.report")


TINY = disagreement.DisagreementConfig(ratings_file="", ease_l2s=(10.0, 40.0), kunn_ks=(3,), k=5,
                                       world=WorldConfig(n_users=60, n_items=50, offset=-2.0),
                                       held_out_mean=2, held_out_max=4, spreads=(0.0, 1.0))


#: the run of the module: TINY's world (so the cell tests reuse its compiled shapes) with 8 models
RUN = dataclasses.replace(TINY, ease_l2s=(10.0, 20.0, 40.0, 80.0), kunn_ks=(3, 5))


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("disagreement")
    summary = runner.run(disagreement.STUDY, RUN, seed=0, out=out, preset="smoke", progress=False)
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
    readme = (out / "README.md").read_text()
    assert "real data disabled" in readme and "## Claims" in readme
    claims = pd.read_csv(out / "table_claims.csv", keep_default_na=False)
    assert list(claims["source's number"]) == ["0.6325", "0.4973", "0.2514", "0 (nDCG = DCG / constant)"]
    assert set(claims.verdict) <= set(reporting.CLAIM_VERDICTS)
    spread = pd.read_csv(out / "table_spread.csv")                # s = 0: no inverted pair (below)
    assert claims.verdict.iloc[-1] == ("reproduced" if spread.inversion_rate.iloc[-1] > 0 else "not reproduced")


def test_summary_statistics_match_brute_force_on_the_model_table(smoke_run):
    out, _ = smoke_run
    config = RUN
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


def test_records_match_the_declared_columns():
    root = jax.random.key(0)
    shared = disagreement.setup(root, TINY)
    (cell,) = disagreement.cells(TINY)
    records = disagreement.compute(root, TINY, cell, shared)
    frame = runner.records_frame(disagreement.STUDY,
                                 runner.check_records(disagreement.STUDY, cell, records))
    scored = frame[frame.part == "model"]
    n_models, targets = 2 + 1, 2 + len(TINY.spreads)          # EASE grid + KUNN grid; obs, complete, s
    assert len(scored) == n_models * targets * 2
    assert list(scored.drop_duplicates(["family", "l2", "user_k", "item_k"]).family) == ["EASE", "EASE", "KUNN"]
    sizes = frame[frame.part == "data"].set_index("statistic").value
    assert sizes["users"] == 60 and sizes["items"] == 50 and sizes["wall time (s)"] > 0
    held_out = frame[frame.part == "held-out sizes"]
    assert sorted(set(held_out.spread)) == list(TINY.spreads)


def test_held_out_sets_are_nested_across_spreads_and_outside_train():
    """Every held-out set is the first n_u items of one order of P+ minus train, so a smaller set
    is contained in a larger one, and none holds a training item."""
    dataset = disagreement.setup(jax.random.key(1), TINY).datasets["simulated"]
    small, large = (dataset.held_out[s].toarray() for s in TINY.spreads)
    complete, train = dataset.complete.toarray(), dataset.train.toarray()
    assert not (complete & train).any()
    for a, b in ((small, large), (large, small)):
        smaller = a.sum(1) <= b.sum(1)
        assert not (a[smaller] & ~b[smaller]).any()
    assert not ((small | large) & ~complete).any()
    assert (dataset.held_out_sizes[0.0] == TINY.held_out_mean).all()


def test_real_data_is_split_with_its_cell_key(tmp_path, monkeypatch):
    """With a ratings file present, setup splits its positives with cell_key(root, its cell)."""
    rows = [(u, i, 5.0 if (u + i) % 3 else 2.0) for u in range(30) for i in range(20) if (u * i) % 4]
    folder = tmp_path / "ml"
    folder.mkdir()
    (folder / "ratings.csv").write_text("userId,movieId,rating,timestamp\n" +
                                        "".join(f"{u},{i},{r},0\n" for u, i, r in rows))
    monkeypatch.setenv(_data.DATA_ENV, str(tmp_path))
    config = dataclasses.replace(TINY, ratings_file="ml/ratings.csv", min_item=1)
    cells = disagreement.cells(config)
    assert cells == [{"data": disagreement.REAL_DATA}, {"data": "simulated"}]
    root = jax.random.key(0)
    real = disagreement.setup(root, config).datasets[disagreement.REAL_DATA]
    positives = real.train + real.test
    expected = missing.split_per_user(runner.cell_key(root, cells[0]), positives, (0.5, 0.0, 0.5),
                                      n_folds=1)[0]
    assert positives.nnz == sum(r >= config.min_rating for _, _, r in rows)
    assert (real.train != expected.train).nnz == 0 and real.complete is None
    records = disagreement.compute(root, config, cells[0], disagreement.setup(root, config))
    runner.check_records(disagreement.STUDY, cells[0], records)
    assert {r["target"] for r in records if r["part"] == "model"} == {"observed test"}


@pytest.mark.parametrize("overrides", [{"train_fraction": 1.0}, {"ease_l2s": ()},
                                       {"kunn_ks": (0,)}, {"kunn_ks": (70, 70)},
                                       {"ease_l2s": (500.0, 500.0)}, {"k": 0},
                                       {"held_out_mean": 50, "held_out_max": 40},
                                       {"spreads": (-1.0,)}])
def test_config_rejects_bad_values(overrides):
    with pytest.raises(ValueError):
        dataclasses.replace(disagreement.PRESETS["default"], **overrides)


def _summary_frames(tau_dcg: float, tau_ndcg: float):
    """A one-data-set summary (plus the paper's row) and a two-spread table, by hand."""
    summary = pd.DataFrame([
        {"data": "simulated", "models": 192, "pearson": 0.99, "kendall": 0.97,
         "inversion_rate": 0.015, "tau(DCG, true DCG)": tau_dcg, "tau(nDCG, true DCG)": tau_ndcg,
         "inv(DCG, true DCG)": 0.04, "inv(nDCG, true DCG)": 0.05},
        {"data": "MovieLens-1M (Jeunen App. A)", "models": 192, **disagreement.PAPER}])
    spread = pd.DataFrame([
        {"spread s": 0.0, "cv held-out": 0.0, "inversion_rate": 0.0,
         "tau(DCG, true DCG)": 0.5, "tau(nDCG, true DCG)": 0.5},
        {"spread s": 1.5, "cv held-out": 1.3, "inversion_rate": 0.17,
         "tau(DCG, true DCG)": 0.6, "tau(nDCG, true DCG)": 0.7}])
    return summary, spread


def test_verdict_names_the_closer_metric_only_beyond_the_tie_margin():
    config = disagreement.PRESETS["default"]
    tie = report_module._verdict(config, *_summary_frames(0.918, 0.9175))
    assert "1.5% of model pairs on simulated (Kendall 0.970)" in tie
    assert "25.1% on MovieLens-1M" in tie
    assert "neither metric orders the models measurably closer" in tie
    assert "0.0% of pairs at equal counts (s = 0), 17.0% at cv 1.30" in tie
    assert "within 0.01 at s = 0; nDCG closer at s = 1.5" in tie
    won = report_module._verdict(config, *_summary_frames(0.95, 0.90))
    assert "DCG orders the models closer to it: Kendall tau against the complete-data DCG@100 " \
           "is 0.950 for DCG and 0.900 for nDCG" in won


def test_claims_set_the_papers_numbers_beside_ours_and_test_equal_counts():
    """Per data set the three App. A numbers beside ours ("differs in setting": one split, other
    data); equal held-out counts must give no inverted pair, and some at the largest spread."""
    summary, spread = _summary_frames(0.9, 0.8)
    config = disagreement.PRESETS["default"]
    claims = report_module.claims(config, summary, spread)
    assert [c.source_value for c in claims] == ["0.6325", "0.4973", "0.2514", "0 (nDCG = DCG / constant)"]
    assert [c.ours for c in claims] == [0.99, 0.97, 0.015, 0.0]
    assert [c.verdict for c in claims] == ["differs in setting"] * 3 + ["reproduced"]
    spread.loc[0, "inversion_rate"] = 0.01
    assert report_module.claims(config, summary, spread)[-1].verdict == "not reproduced"
    assert report_module.claims(config, summary, spread.iloc[:0]) == claims[:3]


