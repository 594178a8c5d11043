"""The Open Bandit loader (`simrec.data.load_open_bandit`) on a fixture it writes and on the
shipped sample (skipped when absent), and the Open Bandit Pipeline conversion (`simrec.obp`):
exact round trips, each key against a hand-built reference, OBP's slate IIPS formula (written
out here) against `simrec.ope.trajectory_dcg`, and the errors on malformed dictionaries."""
import gzip
from pathlib import Path

import jax
import numpy as np
import pandas as pd
import pytest

from simrec import data, feed, obp, ope
from simrec.datafiles import data_root

SAMPLE = data_root() / "open-bandit-sample"


# --------------------------------------------------------------------------------------------
# A fixture in the Open Bandit layout
# --------------------------------------------------------------------------------------------

def fake_log(rng, n_rows: int, n_items: int, propensity, click_rate=None, n_positions: int = 3) -> dict:
    """Columns of an Open Bandit log: items drawn from `propensity` f[n_positions, I] per
    position (positions uniform), clicks Bernoulli(click_rate[k, a]) (default 0.3 everywhere)."""
    position = rng.integers(0, n_positions, n_rows)
    item = np.array([rng.choice(n_items, p=propensity[k]) for k in position])
    rate = np.full((n_positions, n_items), 0.3) if click_rate is None else click_rate
    return {"timestamp": 1_574_553_600_000_000_000 + np.sort(rng.integers(0, 7 * 86_400 * 10**9, n_rows)),
            "item": item, "position": position, "click": rng.random(n_rows) < rate[position, item],
            "propensity": propensity[position, item],
            "user_features": rng.choice(["a1f3", "b7c2", "c9d0"], size=(n_rows, 2)),
            "affinity": rng.random((n_rows, n_items)).round(3)}


def write_open_bandit(folder: Path, policy: str, campaign: str, columns: dict, n_items: int,
                      gzipped: bool = True) -> Path:
    """Write one log (and its item_context.csv) as the dataset ships it: an unnamed index column,
    ISO timestamps, 1-based positions, hashed user features, one affinity column per item."""
    directory = folder / policy / campaign
    directory.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame({
        "timestamp": pd.to_datetime(columns["timestamp"], utc=True).astype(str),
        "item_id": columns["item"], "position": columns["position"] + 1, "click": columns["click"].astype(int),
        "propensity_score": columns["propensity"]})
    for j in range(columns["user_features"].shape[1]):
        table[f"user_feature_{j}"] = columns["user_features"][:, j]
    for i in range(n_items):
        table[f"user-item_affinity_{i}"] = columns["affinity"][:, i]
    path = directory / f"{campaign}.csv"
    text = table.to_csv()
    if gzipped:
        path = path.with_name(path.name + ".gz")
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    items = pd.DataFrame({"item_id": np.arange(n_items), "item_feature_0": np.linspace(-1, 1, n_items),
                          "item_feature_1": [f"h{i % 3}" for i in range(n_items)],
                          "item_feature_2": [f"g{i % 2}" for i in range(n_items)]})
    items.to_csv(directory / "item_context.csv")
    return path


@pytest.fixture()
def fixture_log(tmp_path):
    rng = np.random.default_rng(0)
    n_items = 5
    propensity = np.full((3, n_items), 1 / n_items)
    columns = fake_log(rng, 60, n_items, propensity)
    write_open_bandit(tmp_path, "random", "men", columns, n_items)
    return tmp_path, columns, n_items


def test_loader_reads_back_what_the_fixture_wrote(fixture_log):
    folder, columns, n_items = fixture_log
    log = data.load_open_bandit(folder, "random", "men")
    assert (log.policy, log.campaign, log.n_items, log.n_positions) == ("random", "men", n_items, 3)
    np.testing.assert_array_equal(log.timestamp, columns["timestamp"])
    for name in ("item", "position", "click", "user_features"):
        np.testing.assert_array_equal(getattr(log, name), columns[name])
    np.testing.assert_allclose(log.propensity, columns["propensity"], rtol=1e-15)
    np.testing.assert_allclose(log.affinity, columns["affinity"], rtol=1e-6)
    assert log.item.dtype == np.int64 and log.click.dtype == bool and log.affinity.dtype == np.float32
    assert log.item_numeric_names == ("item_feature_0",)
    assert log.item_categorical_names == ("item_feature_1", "item_feature_2")
    np.testing.assert_allclose(log.item_numeric[:, 0], np.linspace(-1, 1, n_items))
    assert list(log.item_categorical[:, 0]) == [f"h{i % 3}" for i in range(n_items)]


def test_loader_reads_plain_csv_too(tmp_path):
    rng = np.random.default_rng(1)
    columns = fake_log(rng, 10, 4, np.full((3, 4), 0.25))
    write_open_bandit(tmp_path, "bts", "all", columns, 4, gzipped=False)
    assert data.open_bandit_file(tmp_path, "bts", "all").name == "all.csv"
    np.testing.assert_array_equal(data.load_open_bandit(tmp_path, "bts", "all").item, columns["item"])


def _rewrite(path: Path, line: int, column: str, value: str) -> None:
    """Set one field of a gzipped log (line 1 = the header)."""
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    table.loc[line - 2, column] = value
    with gzip.open(path, "wt") as fh:
        fh.write(table.to_csv(index=False))


@pytest.mark.parametrize("line, column, value, problem", [
    (4, "click", "2", "line 4: click '2' is not an integer in 0..1"),
    (3, "position", "0", "line 3: position '0' is not an integer in 1.."),
    (7, "item_id", "5", "line 7: item_id '5' is not an integer in 0..4"),
    (5, "propensity_score", "0", "line 5: propensity_score '0' is not a probability in (0, 1]"),
    (6, "propensity_score", "", "line 6: missing propensity_score"),
    (2, "timestamp", "yesterday", "line 2: timestamp 'yesterday' is not an ISO date-time"),
    (9, "user-item_affinity_2", "x", "line 9: affinity user-item_affinity_2 = 'x' is not a finite number"),
])
def test_loader_errors_name_the_file_and_line(fixture_log, line, column, value, problem):
    folder = fixture_log[0]
    path = folder / "random" / "men" / "men.csv.gz"
    _rewrite(path, line, column, value)
    with pytest.raises(data.DataError, match=f"men.csv.gz, {problem}".replace("(", r"\(").replace(")", r"\)")
                       .replace(".", r"\.")):
        data.load_open_bandit(folder, "random", "men")


def test_loader_refuses_missing_columns_files_and_bad_item_context(fixture_log, tmp_path):
    folder = fixture_log[0]
    with pytest.raises(ValueError, match="no such file; pass the Open Bandit folder"):
        data.load_open_bandit(folder, "bts", "men")
    with pytest.raises(ValueError, match="policy must be one of"):
        data.load_open_bandit(folder, "greedy", "men")
    path = folder / "random" / "men" / "men.csv.gz"
    table = pd.read_csv(path, dtype=str)
    context = folder / "random" / "men" / "item_context.csv"
    items = pd.read_csv(context, index_col=0)
    items.iloc[:-1].to_csv(context)                               # one item short
    with pytest.raises(ValueError, match="item_context.csv, line 6: item_id must list the items 0..4"):
        data.load_open_bandit(folder, "random", "men")
    with gzip.open(path, "wt") as fh:
        fh.write(table.drop(columns="click").to_csv(index=False))
    with pytest.raises(ValueError, match=r"men.csv.gz, line 1: no column\(s\) click"):
        data.load_open_bandit(folder, "random", "men")



def _log_bytes(folder: Path) -> bytes:
    return gzip.decompress((folder / "random" / "men" / "men.csv.gz").read_bytes())


@pytest.mark.parametrize("corrupt, problem", [
    (lambda raw, gz: raw, r"men\.csv\.gz: not gzip data, though its name ends in \.gz; get a fresh copy"),
    (lambda raw, gz: gz[:len(gz) // 2], r"men\.csv\.gz: the gzip data ends early \(a truncated copy\?\)"),
    (lambda raw, gz: gz + b"junk", r"men\.csv\.gz: bytes that are not gzip data follow the gzip stream"),
    (lambda raw, gz: gz[:200] + bytes(64) + gz[264:], r"men\.csv\.gz: corrupt gzip data"),
    (lambda raw, gz: gzip.compress(raw.replace(b"\n", "\nZoë".encode("latin-1"), 1)),
     r"men\.csv\.gz, line 2: byte 0xeb at byte offset \d+ of the decompressed text is not valid utf-8 text"),
    (lambda raw, gz: gzip.compress(raw[:300] + b"\x00" + raw[300:]),
     r"men\.csv\.gz, line \d+: NUL byte at byte offset 300 of the decompressed text"),
    (lambda raw, gz: gzip.compress(raw[:raw.rindex(b"\n", 0, len(raw) - 1) + 10]),
     r"men\.csv\.gz, line 61: missing .*; the file ends in the middle of this line"),
])
def test_corrupted_gzip_logs_are_one_line_data_errors(fixture_log, corrupt, problem):
    """Non-gzip bytes in a .csv.gz used to surface as gzip's BadGzipFile, Latin-1 bytes as a bare
    UnicodeDecodeError, without the file."""
    folder = fixture_log[0]
    path = folder / "random" / "men" / "men.csv.gz"
    raw = _log_bytes(folder)
    path.write_bytes(corrupt(raw, path.read_bytes()))
    with pytest.raises(data.DataError, match=problem) as error:
        data.load_open_bandit(folder, "random", "men")
    assert "\n" not in str(error.value) and str(path) in str(error.value)


def test_a_gzipped_log_under_a_plain_name_and_a_bom_and_missing_columns(fixture_log):
    folder, columns, _ = fixture_log
    path = folder / "random" / "men" / "men.csv.gz"
    raw = _log_bytes(folder)
    path.write_bytes(gzip.compress(b"\xef\xbb\xbf" + raw))                 # a BOM is skipped
    np.testing.assert_array_equal(data.load_open_bandit(folder, "random", "men").item, columns["item"])
    path.unlink()
    (folder / "random" / "men" / "men.csv").write_bytes(gzip.compress(raw))
    with pytest.raises(data.DataError, match=r"men\.csv: gzip-compressed data under a plain \.csv name; rename it "
                                             r"to men\.csv\.gz"):
        data.load_open_bandit(folder, "random", "men")
    header, rest = raw.split(b"\n", 1)
    path.write_bytes(gzip.compress(header.replace(b",propensity_score", b"") + b"\n" + rest))
    (folder / "random" / "men" / "men.csv").unlink()
    with pytest.raises(data.DataError, match=r"men\.csv\.gz, line 1: no column\(s\) propensity_score"):
        data.load_open_bandit(folder, "random", "men")
    context = folder / "random" / "men" / "item_context.csv"
    context.write_bytes(context.read_bytes().replace(b"h1", "hé".encode("latin-1"), 1))
    path.write_bytes(gzip.compress(raw))
    with pytest.raises(data.DataError, match=r"item_context\.csv, line \d+: byte 0xe9 .* is not valid utf-8 text"):
        data.load_open_bandit(folder, "random", "men")

@pytest.mark.skipif(not (SAMPLE / "random" / "all" / "all.csv.gz").is_file(),
                    reason="Open Bandit sample not found below the data folder")
@pytest.mark.parametrize("policy", data.OPEN_BANDIT_POLICIES)
def test_loader_on_the_shipped_sample(policy):
    items = {"all": 80, "men": 34, "women": 46}
    for campaign, n_items in items.items():
        log = data.load_open_bandit(SAMPLE, policy, campaign)
        assert log.item.shape == (10_000,) and log.n_items == n_items and log.n_positions == 3
        assert log.item.max() < n_items and set(np.unique(log.position)) == {0, 1, 2}
        assert np.all(np.diff(log.timestamp) >= 0)                     # the files are sorted by time
        assert 0.003 < log.click.mean() < 0.008                        # the README's 0.4-0.7 %
        if policy == "random":
            np.testing.assert_allclose(log.propensity, 1 / n_items)
        else:
            assert log.propensity.min() < 1 / n_items < log.propensity.max()


# --------------------------------------------------------------------------------------------
# The conversion
# --------------------------------------------------------------------------------------------

def _small_log(seed: int = 0, sessions: int = 300, stochastic: bool = True):
    rng = np.random.default_rng(seed)
    X, A, K = 12, 20, 4
    like = rng.beta(2, 6, (X, A)).astype(np.float32)
    scores = rng.normal(size=(X, A)).astype(np.float32)
    scenario = feed.Scenario(feed.Exponential(np.float32(0.7)), (feed.from_table(like), feed.from_table(like / 2)),
                             np.full(X, 1 / X, np.float32), ("like", "watch"))
    ranker = feed.PlackettLuce(feed.from_table(scores), 1.0) if stochastic else feed.Sort(feed.from_table(scores))
    logger = feed.Policy(feed.all_items(A), ranker, K)
    log = feed.simulate(jax.random.key(seed), scenario, logger, sessions, day=3, num_samples=200)
    return log, scenario, A


def _hand_log():
    """Three sessions, K = 3: depths 2, 0 and 3; two signals."""
    items = np.array([[4, 1, -1], [-1, -1, -1], [0, 2, 3]], np.int32)
    viewed = items >= 0
    rewards = np.zeros((2, 3, 3), bool)
    rewards[0, 0, 1] = rewards[0, 2, 0] = rewards[1, 2, 2] = True
    exposure = np.where(viewed, np.array([[0.5, 0.25, 0], [0, 0, 0], [0.125, 1.0, 0.75]]), 0).astype(np.float32)
    return feed.Log(users=np.array([2, 0, 1], np.int32), items=items, viewed=viewed, rewards=rewards,
                    day=np.array([5, 5, 6], np.int32), logging_exposure=exposure, signals=("click", "buy"))


def _assert_logs_equal(a, b):
    for name in ("users", "items", "viewed", "rewards", "day", "logging_exposure"):
        x, y = np.asarray(getattr(a, name)), np.asarray(getattr(b, name))
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert a.signals == b.signals


def test_each_key_against_a_hand_built_reference():
    log = _hand_log()
    d = obp.to_bandit_feedback(log, signal="buy", n_actions=6)
    rounds = [(0, 0), (0, 1), (2, 0), (2, 1), (2, 2)]             # (session, rank), row-major
    assert d["n_rounds"] == 5 and d["n_actions"] == 6 and d["len_list"] == 3
    assert list(d["action"]) == [4, 1, 0, 2, 3] and list(d["position"]) == [0, 1, 0, 1, 2]
    assert list(d["slate_id"]) == [s for s, _ in rounds]
    assert list(d["reward"]) == [0, 0, 0, 0, 1] and d["signal"] == "buy"
    assert d["rewards"].tolist() == [[0, 1, 1, 0, 0], [0, 0, 0, 0, 1]]
    assert list(d["pscore"]) == [0.5, 0.25, 0.125, 1.0, 0.75] and np.array_equal(d["pscore"], d["pscore_item_position"])
    assert d["context"].tolist() == [[2], [2], [1], [1], [1]]
    assert np.array_equal(d["action_context"], np.eye(6))
    assert list(d["slate_user"]) == [2, 0, 1] and list(d["slate_day"]) == [5, 5, 6]
    features = np.arange(6.0).reshape(3, 2)
    d = obp.to_bandit_feedback(log, context=features, action_context=np.ones((5, 1)))
    assert d["n_actions"] == 5 and d["context"].tolist() == [[4, 5], [4, 5], [2, 3], [2, 3], [2, 3]]
    assert list(d["reward"]) == [0, 1, 1, 0, 0]


def test_log_to_dict_to_log_is_exact():
    _assert_logs_equal(obp.from_bandit_feedback(obp.to_bandit_feedback(_hand_log())), _hand_log())
    log, _, n_items = _small_log(stochastic=False)
    back = obp.from_bandit_feedback(obp.to_bandit_feedback(log, n_actions=n_items, signal=1))
    _assert_logs_equal(back, log)


def test_dict_to_log_to_dict_keeps_the_representable_fields():
    log, _, n_items = _small_log(1, stochastic=False)
    d = obp.to_bandit_feedback(log, n_actions=n_items)
    slates = {key: d[key] for key in ("n_rounds", "n_actions", "action", "position", "reward", "pscore",
                                      "context", "action_context", "slate_id")}
    again = obp.to_bandit_feedback(obp.from_bandit_feedback(slates), n_actions=n_items,
                                   context=obp.contexts(slates).table)
    for key, value in slates.items():
        assert np.array_equal(again[key], value), key
    # OBD-like rounds without slates: one-slot sessions; positions are not representable
    rng = np.random.default_rng(2)
    n = 50
    rounds = {"n_rounds": n, "n_actions": 7, "action": rng.integers(0, 7, n), "position": rng.integers(0, 3, n),
              "reward": (rng.random(n) < 0.3).astype(int), "pscore": rng.uniform(0.01, 1, n),
              "context": rng.integers(0, 2, (n, 3)).astype(float), "action_context": rng.normal(size=(7, 2))}
    back = obp.from_bandit_feedback(rounds)
    assert back.items.shape == (n, 1) and np.all(np.asarray(back.viewed))
    table = obp.contexts(rounds).table
    np.testing.assert_array_equal(table[np.asarray(back.users)], rounds["context"])
    again = obp.to_bandit_feedback(back, n_actions=7, context=table, action_context=rounds["action_context"])
    for key in ("n_rounds", "n_actions", "action", "reward", "context", "action_context"):
        assert np.array_equal(again[key], rounds[key]), key
    np.testing.assert_allclose(again["pscore"], rounds["pscore"], rtol=1e-7)       # float32 in a Log
    assert not again["position"].any()


@pytest.mark.parametrize("m", [np.inf, 3.0])
def test_obp_slate_iips_formula_equals_simrec_dcg(m):
    """OBP's SlateIndependentIPS: sum over rounds of r · π_e / π_b, divided by the number of
    distinct slates; its pscore floored at 1/m is simrec's clipping min(m, 1/ε₀)."""
    log, scenario, n_items = _small_log(3, sessions=400)
    target = feed.Policy(feed.all_items(n_items), feed.Sort(feed.from_table(np.asarray(
        scenario.quality[0].params))), 4)
    table = feed.exposure(None, target, scenario.view, np.arange(12)).mean
    target_exposure = ope.logged_exposures(log, table)
    d = obp.to_bandit_feedback(log, n_actions=n_items)
    evaluation = obp.round_values(log, target_exposure)
    assert np.all(np.asarray(obp.round_values(log, log.viewed)))
    behaviour = np.maximum(d["pscore_item_position"], 1 / m)
    iips = np.sum(d["reward"] * evaluation / behaviour) / np.unique(d["slate_id"]).size
    simrec = ope.mean_estimate(ope.trajectory_dcg(log.rewards[0], log.logging_exposure, target_exposure,
                                                  log.viewed, m)).value
    assert iips == pytest.approx(float(simrec), rel=1e-5)


def _rounds() -> dict:
    d = obp.to_bandit_feedback(_hand_log(), n_actions=6)
    return {key: d[key] for key in ("n_rounds", "n_actions", "action", "position", "reward", "pscore",
                                    "context", "action_context", "slate_id")}


@pytest.mark.parametrize("change, problem", [
    (lambda d: d.pop("pscore"), "lacks the key\\(s\\) pscore"),
    (lambda d: d.update(action=np.array([4, 1, 0, 2, 6])), r"action ids in \[0, n_actions = 6\), found 6 at round 4"),
    (lambda d: d.update(pscore=np.array([0.5, 0.0, 1, 1, 1])), r"probabilities in \(0, 1\], found 0.0 at round 1"),
    (lambda d: d.update(reward=np.array([0, 2, 0, 0, 0])), "rewards must be 0 or 1"),
    (lambda d: d.update(action=np.array([4, 1, 0, 2])), "must be a vector of n_rounds = 5"),
    (lambda d: d.update(position=np.array([0, 2, 0, 1, 2])), r"has rounds at positions \[0, 2\]; a Log holds a viewed prefix"),
    (lambda d: d.update(position=None), "has slate_id but position is None"),
    (lambda d: d.update(context=np.array([[1], [2], [1], [1], [1]])), "slate 0 has rounds with different contexts"),
    (lambda d: d.update(n_rounds=-1), "n_rounds"),
])
def test_malformed_dictionaries_are_refused_with_the_key(change, problem):
    d = _rounds()
    change(d)
    with pytest.raises(ValueError, match=problem):
        obp.from_bandit_feedback(d)
    with pytest.raises(ValueError, match="must be a dict"):
        obp.from_bandit_feedback([("n_rounds", 1)])


def test_to_bandit_feedback_refuses_a_bad_log():
    log = _hand_log()
    with pytest.raises(ValueError, match="unknown signal 'like'"):
        obp.to_bandit_feedback(log, signal="like")
    with pytest.raises(ValueError, match="log.items holds item 4 but n_actions = 3"):
        obp.to_bandit_feedback(log, n_actions=3)
    zero = feed.Log(log.users, log.items, log.viewed, log.rewards, log.day,
                    np.where(log.viewed, 0.0, 0.0).astype(np.float32), log.signals)
    with pytest.raises(ValueError, match="logging_exposure must be in \\(0, 1\\]"):
        obp.to_bandit_feedback(zero)
    with pytest.raises(ValueError, match="context must be a feature table"):
        obp.to_bandit_feedback(log, context=np.arange(3))


def test_open_bandit_feedback_matches_obp_meaning(fixture_log):
    folder, columns, n_items = fixture_log
    log = data.load_open_bandit(folder, "random", "men")
    d = obp.open_bandit_feedback(log)
    assert d["n_rounds"] == 60 and d["n_actions"] == n_items
    np.testing.assert_array_equal(d["position"], columns["position"])
    np.testing.assert_array_equal(d["reward"], columns["click"].astype(int))
    # one-hot user features without each feature's first category (pandas.get_dummies, drop_first)
    dummies = pd.get_dummies(pd.DataFrame(columns["user_features"]).astype(str), drop_first=True)
    np.testing.assert_array_equal(d["context"], dummies.to_numpy(float))
    assert d["action_context"].shape == (n_items, 3)
    np.testing.assert_array_equal(d["action_context"][:, 0], [i % 3 for i in range(n_items)])
    back = obp.from_bandit_feedback(d, signal_name="click")
    assert back.signals == ("click",) and back.items.shape == (60, 1)
    np.testing.assert_array_equal(np.asarray(back.items)[:, 0], columns["item"])


def test_round_trip_through_an_npz_file(tmp_path):
    """What a user does to hand a log to OBP in another process: np.savez, then np.load."""
    log = _hand_log()
    np.savez(tmp_path / "log.npz", **obp.to_bandit_feedback(log))
    with np.load(tmp_path / "log.npz") as stored:
        loaded = dict(stored)
    _assert_logs_equal(obp.from_bandit_feedback(loaded), log)


def test_bench_feed_exports_what_obp_iips_turns_into_simrec_estimates(tmp_path):
    """`simrec bench feed`'s peer input: OBP's IIPS formula on the saved .npz gives simrec's
    clipped-DCG estimate for every m."""
    from simrec_studies import bench_feed

    log, scenario, n_items = _small_log(4, sessions=200, stochastic=False)
    target_exposure = np.asarray(log.logging_exposure)[::-1].copy()         # any exposures in [0, 1]
    target_exposure[~np.asarray(log.viewed)] = 0
    exported = bench_feed.export_for_obp(str(tmp_path / "log.npz"), log, target_exposure, 1, 150)
    assert exported["sessions"] == 150
    with np.load(tmp_path / "log.npz") as npz:
        stored = dict(npz)
    assert exported["rounds"] == stored["reward"].size == int(np.asarray(log.viewed)[:150].sum())
    for m, value in zip(bench_feed.M_VALUES, exported["simrec_values"]):
        behaviour = np.maximum(stored["pscore_item_position"], 1 / m)
        iips = np.sum(stored["reward"] * stored["evaluation_policy_pscore_item_position"] / behaviour) \
            / np.unique(stored["slate_id"]).size
        assert iips == pytest.approx(value, rel=1e-5, abs=1e-7)


def test_bench_slate_exports_what_obp_slate_estimators_turn_into_simrec_estimates(tmp_path):
    """`simrec bench slate`'s peer input: OBP's SIPS, RIPS and Cascade-DR formulas (per row: the
    weight times the reward; Cascade-DR's iw (r − q̂(a)) + iw_prev Σ_a π(a) q̂(a), iw_prev = 1 on a
    slate's first row) and its self-normalised SN-SIPS and SN-RIPS (each row's term divided by the
    mean weight of its position), evaluated here in numpy on the saved .npz, give simrec's estimates; and the
    target's next items written without simrec agree with `feed.next_item_mean` of one-hot values."""
    from simrec import feed
    from simrec_studies import bench_slate

    scenario, logger, target, log, model, tables = bench_slate.setting(3_000, 20, 12, 4)
    _, (data, targets) = bench_slate.bench_simrec(scenario, logger, target, log, model, repeats=1)
    expected = bench_slate.export_for_obp(str(tmp_path / "slates.npz"), log, data, targets["T"], model,
                                          tables["target"], 2_000)
    with np.load(tmp_path / "slates.npz") as npz:
        s = dict(npz)
    k, a = int(s["len_list"]), int(s["n_actions"])
    slates = np.unique(s["slate_id"]).size
    assert slates == 2_000 and s["reward"].size == 2_000 * k
    sips = np.sum(s["reward"] * s["evaluation_policy_pscore"] / s["pscore"]) / slates
    iw = s["evaluation_policy_pscore_cascade"] / s["pscore_cascade"]
    rips = np.sum(s["reward"] * iw) / slates
    q_hat = s["q_hat"].reshape(-1, a)
    previous = np.roll(iw, 1)
    previous[s["position"] == 0] = 1.0
    cascade = np.sum(iw * (s["reward"] - q_hat[np.arange(q_hat.shape[0]), s["action"]])
                     + previous * np.sum(s["evaluation_policy_action_dist"].reshape(-1, a) * q_hat, axis=1)) / slates
    position_mean = lambda w: np.bincount(s["position"], weights=w, minlength=k)[s["position"]] / slates
    snsips = np.sum(s["reward"] * s["evaluation_policy_pscore"] / s["pscore"]
                    / position_mean(s["evaluation_policy_pscore"] / s["pscore"])) / slates
    snrips = np.sum(s["reward"] * iw / position_mean(iw)) / slates
    assert set(expected) == set(bench_slate.OBP_ESTIMATORS)
    for name, value in (("sips", sips), ("rips", rips), ("snsips", snsips), ("snrips", snrips),
                        ("cascade_dr", cascade)):
        assert value == pytest.approx(expected[name], rel=1e-5), name
    users, items = np.asarray(log.users)[:300], np.asarray(log.items)[:300]
    nexts = bench_slate.target_next_items(tables["target"], users, items)
    logged = np.concatenate([np.ones((300, 1), bool), items[:, :-1] >= 0], axis=1)
    for item in range(a):
        mean = np.asarray(feed.next_item_mean(target, users, items, np.arange(a) == item))
        np.testing.assert_array_equal(mean[logged] == 1.0, (nexts == item)[logged])


@pytest.mark.parametrize("argv, message", [(["--items", "4", "--feed-length", "5"], "--feed-length 5 exceeds"),
                                           (["--sessions", "1000", "--obp-sessions", "2000"], "--obp-sessions"),
                                           (["--sessions", "10"], "--sessions")])
def test_bench_slate_names_a_bad_command_line(argv, message, capsys):
    from simrec_studies import bench_slate

    assert bench_slate.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("simrec bench slate: error:") and message in err and "Traceback" not in err
