"""The slot-wise benchmark: simrec's side against the formulas computed here by hand on a log in Open
Bandit Pipeline's format, the reward model against a loop, a run without the peer environment, and
(when SIMREC_OBP_VENV names one) OBP reproducing simrec's estimates on OBP's own log."""
import json
import math
import os

import numpy as np
import pytest

from simrec_studies import bench_slotwise


def _obp_format_log(n=400, k=3, a=4, seed=0):
    """A factorisable log in OBP's flat layout: context-free per-slot policies, binary rewards."""
    rng = np.random.default_rng(seed)
    logger, target = rng.dirichlet(np.ones(a)), rng.dirichlet(np.ones(a))
    action = rng.choice(a, size=(n, k), p=logger)
    reward = (rng.uniform(size=(n, k)) < 0.3 + 0.1 * (action == 0)).astype(np.float64)
    return {"action": action.ravel(), "reward": reward.ravel(), "len_list": k, "n_actions": a,
            "pscore_item_position": logger[action].ravel(), "evaluation_policy_pscore_item_position":
                target[action].ravel(), "evaluation_policy_action_dist": np.tile(target, n * k)}, logger, target


def test_the_slot_reward_model_is_each_slots_mean_reward_per_action():
    action = np.array([[0, 1], [0, 0], [2, 1]])
    reward = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    model = bench_slotwise.slot_reward_model(action, reward, 3)
    np.testing.assert_allclose(model, [[0.5, 0.5, 1.0], [1.0, 0.5, 0.5]])


def test_simrecs_side_equals_the_formulas_by_hand():
    log, logger, target = _obp_format_log()
    ours, q_hat = bench_slotwise.simrec_estimates(log, repeats=1)
    k, a = log["len_list"], log["n_actions"]
    action, reward = log["action"].reshape(-1, k), log["reward"].reshape(-1, k)
    ratio = target[action] / logger[action]
    prefix = np.cumprod(ratio, axis=1)
    model = q_hat.reshape(-1, k, a)[0]
    before = np.concatenate([np.ones((action.shape[0], 1)), prefix[:, :-1]], axis=1)
    cascade_dr = prefix * (reward - model[np.arange(k), action]) + before * (model @ target)[None, :]
    expected = {"sips": (prefix[:, -1:] * reward).sum(1), "iips": (ratio * reward).sum(1),
                "rips": (prefix * reward).sum(1), "cascade_dr": cascade_dr.sum(1)}
    for name, values in expected.items():
        assert ours[name]["value"] == pytest.approx(values.mean(), rel=1e-5), name
        assert ours[name]["seconds"] >= 0


def test_without_a_peer_environment_it_says_so(capsys, tmp_path):
    assert bench_slotwise.main(["--rounds", "100", "--peer-venv", str(tmp_path / "none")]) == 0
    assert "obp unavailable" in capsys.readouterr().out


@pytest.mark.skipif(not os.environ.get("SIMREC_OBP_VENV"), reason="no OBP peer environment (SIMREC_OBP_VENV)")
def test_obp_reproduces_simrec_on_its_own_log(tmp_path):
    out = tmp_path / "bench.json"
    assert bench_slotwise.main(["--rounds", "2000", "--repeats", "1", "--json", str(out)]) == 0
    peer = json.loads(out.read_text())["obp"]
    assert max(peer[name]["relative_difference"] for name in bench_slotwise.ESTIMATORS) <= 1e-6
    assert all(math.isfinite(peer[name]["value"]) for name in bench_slotwise.ESTIMATORS)
