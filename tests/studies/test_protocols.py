"""The protocols study (Steck RecSys'13 Table 1) at its smoke preset, its MNAR rating simulator
(star shares and per-star observation rates against their configured values, 4-SE tolerance) and
its winner bookkeeping against a brute-force count."""
import dataclasses
import itertools
import json

import jax
import numpy as np
import pandas as pd
import pytest

from simrec import runner
from studies import protocols


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("protocols")
    runner.run(protocols.STUDY, protocols.PRESETS["smoke"], seed=0, out=out, preset="smoke",
               progress=False)
    return out


def test_smoke_outputs_and_winners(smoke_run):
    assert json.loads((smoke_run / "manifest.json").read_text())["study"] == "protocols"
    assert (smoke_run / "fig_protocols.png").exists()
    table = pd.read_csv(smoke_run / "table_protocols.csv")
    assert set(table.protocol) >= set(protocols.PROTOCOLS)
    ranking = table[table.metric != "RMSE"]
    for _, row in ranking.iterrows():                  # winner = larger value, equal = tie
        expected = ("tie" if row["MF-RMSE"] == row["AllRank"]
                    else "MF-RMSE" if row["MF-RMSE"] > row["AllRank"] else "AllRank")
        assert row.winner == expected
    rmse = table[table.metric == "RMSE"].iloc[0]
    assert rmse.winner == ("MF-RMSE" if rmse["MF-RMSE"] < rmse["AllRank"] else "AllRank")
    claim = pd.read_csv(smoke_run / "table_claim.csv")
    wide = ranking.pivot(index="metric", columns="protocol", values="winner")
    across_protocols = [a != b for m in wide.index
                        for a, b in itertools.combinations(wide.loc[m], 2)]
    across_metrics = [a != b for p in wide.columns for a, b in itertools.combinations(wide[p], 2)]
    row = claim.iloc[0]
    assert row["P(winner differs | two protocols, same metric)"] == pytest.approx(np.mean(across_protocols))
    assert row["P(winner differs | two metrics, same protocol)"] == pytest.approx(np.mean(across_metrics))


def test_simulated_ratings_follow_the_configured_shares_and_mnar_rates():
    config = protocols.PRESETS["smoke"]
    stars, observed = protocols._simulated_ratings(jax.random.key(0), config)
    n = stars.size
    shares = np.array([(stars == r).mean() for r in range(1, 6)])
    assert np.all(np.abs(shares - np.array(config.star_shares)) <= 2 / n + 1e-12)  # quantile cut
    dense = observed.toarray()
    assert np.all((dense == 0) | (dense == stars))                     # observed = true stars
    for r, p in zip(range(1, 6), config.observe_probability):
        pool = stars == r
        rate = (dense[pool] > 0).mean()
        se = np.sqrt(p * (1 - p) / pool.sum())
        assert abs(rate - p) <= 4 * se


def test_real_data_cell_only_when_the_file_exists():
    config = dataclasses.replace(protocols.PRESETS["default"], ratings_file="no/such.csv")
    assert protocols.cells(config) == [{"data": "simulated"}]


@pytest.mark.parametrize("overrides", [{"star_shares": (0.5, 0.5, 0.1, 0.1, 0.1)},
                                       {"observe_probability": (0.0, 0.1, 0.1, 0.1, 0.1)},
                                       {"test_fraction": 0.0}, {"missing_weight": 0.0},
                                       {"dim": 0}])
def test_config_rejects_bad_values(overrides):
    with pytest.raises(ValueError):
        dataclasses.replace(protocols.PRESETS["default"], **overrides)
