"""Benchmark ``simrec bench slate``: what the slate estimators cost per 10⁶ logged sessions, and Open
Bandit Pipeline's slate estimators reproducing simrec's on the same logs.

The world: ``--users`` contexts with uniform activity, ``--items`` items, click probabilities
q(x, a) = sigmoid(⟨u_x, v_a⟩/2 + b_a − 2) from a rank-4 model; an exponential view model (γ = 0.8);
feeds of K = ``--feed-length`` items. The logger is Plackett–Luce (T = 1) over the true logit plus
noise (sd 1); the target sorts by the true logit plus noise (sd 0.3). Cascade-DR's reward model is
`simrec.ope.click_rate_model` of a separate pilot log of 10,000 sessions.

simrec, timed after a warm-up call (median of ``--repeats`` warm calls; compilation reported
apart), on ``--sessions`` logged sessions:

* the propensities: `feed.prefix_log_probability` of the logger and of the target (π₀(s_1:k),
  π(s_1:k) of every logged prefix; closed forms, O(N·K²) host work) and `feed.next_item_mean` of
  the target (Cascade-DR's baseline, O(N·K²) for Sort, O(N·K·C) for Plackett–Luce);
* each slate estimator's estimate and standard error given those inputs (`ope.compare` with that
  estimator alone, m = ∞): RIPS, SIPS, SN-SIPS, β-SIPS and Cascade-DR, and DCG for reference.

Side by side, in the same run, Open Bandit Pipeline 0.5.7 (Saito et al. 2021; its own virtual
environment, created as ``simrec bench feed`` documents: ``--peer-venv``, ``--setup-peer``):
`SlateStandardIPS`, `SlateRewardInteractionIPS`, their self-normalised variants
`SelfNormalizedSlateStandardIPS` and `SelfNormalizedSlateRewardInteractionIPS`, and
`SlateCascadeDoublyRobust` (each timed on its second call) on the first
``--obp-sessions`` sessions of the same log, exported with K rows per session (slate_id, position,
action; reward 0 past the viewed ranks) and the same propensities: pscore = π₀ of the whole
logged prefix on every row (SIPS), pscore_cascade = π₀(s_1:k) per row (carried past the logged
prefix, where the reward is 0), and for Cascade-DR q_hat = q̂(x, a) for all A actions on the
viewed rows (0 past them) with the target's distribution of its next item after the logged
prefix, computed here without simrec (one-hot at the best item the target's sort has not shown
yet). On these inputs OBP's five estimators are simrec's SIPS, RIPS, SN-SIPS, SN-RIPS (OBP divides each
position's weighted rewards by the mean weight at that position: for SN-SIPS the whole slate's, for
SN-RIPS the carried prefix's, simrec's `ope.rank_normalisers`) and Cascade-DR at m = ∞, so
the run checks that OBP reproduces simrec's estimates (largest relative difference printed; OBP
computes in float64, simrec's weights in float32) and compares both sides' seconds per 10⁶
sessions. OBP cannot compute these propensities for a Plackett–Luce logger itself (it enumerates
every slate); it is given simrec's.

Usage: ``simrec bench slate [--sessions N] [--users X] [--items A] [--feed-length K]
[--obp-sessions N] [--peer-venv PATH] [--setup-peer] [--repeats N] [--json PATH]``. The machine is
shared: figures vary between runs, so compare simrec and OBP within one run.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from simrec_studies._bench_args import Parser, integer, positive_int, usage_errors
from simrec_studies.bench_feed import OBP_LOADER, peer_python, timed

ESTIMATORS = ("rips", "snrips", "sips", "snsips", "sips_beta", "cascade_dr", "dcg")
OBP_ESTIMATORS = {"sips": "SlateStandardIPS", "rips": "SlateRewardInteractionIPS",
                  "snsips": "SelfNormalizedSlateStandardIPS", "snrips": "SelfNormalizedSlateRewardInteractionIPS",
                  "cascade_dr": "SlateCascadeDoublyRobust"}
PER = 1_000_000                          # costs are reported in seconds per PER sessions

#: driver code defining ``slate_estimates(log, names)``: OBP's slate estimators named in ``names`` on
#: a log in OBP's flat slate format (dict of arrays with len_list and n_actions), each timed on its
#: second call ({name: {value, seconds}}); shared with ``simrec bench slotwise``
OBP_SLATE_ESTIMATES = r'''
from obp.ope import estimators_slate as slate
def slate_estimates(log, names):
    K, A = int(log["len_list"]), int(log["n_actions"])
    common = {"slate_id": log["slate_id"], "reward": log["reward"], "position": log["position"]}
    standard = lambda: dict(pscore=log["pscore"], evaluation_policy_pscore=log["evaluation_policy_pscore"])
    cascade = lambda: dict(pscore_cascade=log["pscore_cascade"],
                           evaluation_policy_pscore_cascade=log["evaluation_policy_pscore_cascade"])
    calls = {
        "sips": lambda: slate.SlateStandardIPS(len_list=K).estimate_policy_value(**common, **standard()),
        "iips": lambda: slate.SlateIndependentIPS(len_list=K).estimate_policy_value(
            **common, pscore_item_position=log["pscore_item_position"],
            evaluation_policy_pscore_item_position=log["evaluation_policy_pscore_item_position"]),
        "rips": lambda: slate.SlateRewardInteractionIPS(len_list=K).estimate_policy_value(**common, **cascade()),
        "snsips": lambda: slate.SelfNormalizedSlateStandardIPS(len_list=K).estimate_policy_value(
            **common, **standard()),
        "snrips": lambda: slate.SelfNormalizedSlateRewardInteractionIPS(len_list=K).estimate_policy_value(
            **common, **cascade()),
        "cascade_dr": lambda: slate.SlateCascadeDoublyRobust(len_list=K, n_unique_action=A).estimate_policy_value(
            **common, **cascade(), action=log["action"], q_hat=log["q_hat"],
            evaluation_policy_action_dist=log["evaluation_policy_action_dist"]),
    }
    out = {}
    for name in names:
        calls[name]()                                # warm-up: first-call costs apart
        start = time.perf_counter()
        value = float(calls[name]())
        out[name] = {"value": value, "seconds": time.perf_counter() - start}
    return out
'''

OBP_DRIVER = OBP_LOADER + OBP_SLATE_ESTIMATES + r'''
out = {"obp_version": __import__("importlib.metadata").metadata.version("obp")}
out.update(slate_estimates(dict(np.load(sys.argv[1])), ["sips", "rips", "snsips", "snrips", "cascade_dr"]))
print(json.dumps(out))
'''


def world(num_users: int, num_items: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Click probabilities and the logger's and target's scores, each f32[num_users, num_items]."""
    rng = np.random.default_rng(seed)
    logit = (rng.normal(size=(num_users, 4)) @ rng.normal(size=(4, num_items)) / 2.0
             + rng.normal(size=num_items) - 2.0)
    return {"quality": (1.0 / (1.0 + np.exp(-logit))).astype(np.float32),
            "logger": (logit + rng.normal(size=logit.shape)).astype(np.float32),
            "target": (logit + 0.3 * rng.normal(size=logit.shape)).astype(np.float32)}


def setting(num_sessions: int, num_users: int, num_items: int, feed_length: int):
    """(scenario, logger, target, log of num_sessions, reward model f64[A]) of the module docstring."""
    import jax

    from simrec import feed, ope

    tables = world(num_users, num_items)
    scenario = feed.Scenario(feed.Exponential(0.8), (feed.from_table(tables["quality"]),),
                             np.full(num_users, 1.0 / num_users, np.float32), ("click",))
    logger = feed.Policy(feed.all_items(num_items), feed.PlackettLuce(feed.from_table(tables["logger"]), 1.0),
                         feed_length)
    target = feed.Policy(feed.all_items(num_items), feed.Sort(feed.from_table(tables["target"])), feed_length)
    pilot = feed.simulate(jax.random.key(0), scenario, logger, 10_000)
    log = feed.simulate(jax.random.key(1), scenario, logger, num_sessions)
    return scenario, logger, target, log, ope.click_rate_model(pilot, num_items, prior_views=10.0), tables


def bench_simrec(scenario, logger, target, log, model, repeats: int) -> tuple[list[dict], object]:
    """Timings of the propensities and of each estimator (module docstring), and the estimators'
    inputs on the log (`ope.from_log`)."""
    from simrec import feed, ope

    users, items = np.asarray(log.users), np.asarray(log.items)
    n = users.shape[0]
    rows = []
    for what, call in (("π₀(s_1:k) of the logger (Plackett–Luce)", lambda: feed.prefix_log_probability(
                            logger, users, items).block_until_ready()),
                       ("π(s_1:k) of the target (Sort)", lambda: feed.prefix_log_probability(
                            target, users, items).block_until_ready()),
                       ("the target's next-item mean of q̂ (Cascade-DR)", lambda: feed.next_item_mean(
                            target, users, items, model).block_until_ready())):
        seconds, compile_s, _ = timed(call, repeats)
        rows.append({"what": what, "seconds": seconds, "compile_s": compile_s, "per_million": seconds * PER / n})
    on = ope.from_log(log, {"R0": logger, "T": target}, feed.position_model(scenario.view),
                      reward_models={"click": model}, slates=True)
    data, targets = on.data["click"], {"T": on.targets["click"]["T"]}
    for name in ESTIMATORS:
        seconds, compile_s, table = timed(lambda: ope.compare(data, targets, np.inf, estimators=[name]), repeats)
        rows.append({"what": ope.ESTIMATORS[name].label, "estimator": name, "seconds": seconds,
                     "compile_s": compile_s, "per_million": seconds * PER / n,
                     "value": float(table.value.iloc[0]), "se": float(table.value_se.iloc[0])})
    for row in rows:
        print(f"  simrec {row['what']:<48} {row['seconds']:8.3f}s on {n:,} sessions = "
              f"{row['per_million']:8.3f}s per 10⁶ (compile {row['compile_s']:.2f}s)", flush=True)
    return rows, (data, targets)


def target_next_items(target_scores: np.ndarray, users: np.ndarray, items: np.ndarray) -> np.ndarray:
    """The item a Sort target shows at rank k after the logged prefix s_1:k-1: the best-scored item
    (ties: lower id) not among s_1:k-1, written here without simrec.  i64[N, K]."""
    k = items.shape[1]
    order = np.lexsort((np.broadcast_to(np.arange(target_scores.shape[1]), target_scores.shape), -target_scores),
                       axis=1)[:, :k][users]                                           # [N, K] best first
    chosen = np.empty(items.shape, np.int64)
    for j in range(k):
        free = ~np.any(order[:, :j + 1, None] == items[:, None, :j], axis=2)
        chosen[:, j] = order[np.arange(len(users)), free.argmax(axis=1)]
    return chosen


def export_for_obp(path: str, log, data, target, model: np.ndarray, target_scores: np.ndarray, sessions: int) -> dict:
    """Save the first ``sessions`` sessions in OBP's slate format with the propensities and Cascade-DR
    inputs of the module docstring to the .npz ``path``; return simrec's estimates of the same
    sessions ({estimator: value} at m = ∞)."""
    from simrec import ope

    users, items = np.asarray(log.users)[:sessions], np.asarray(log.items)[:sessions]
    viewed = np.asarray(log.viewed)[:sessions]
    n, k = items.shape
    a = model.shape[0]
    behaviour = np.exp(np.asarray(data.logging_prefix, np.float64)[:sessions])
    evaluation = np.exp(np.asarray(target.prefix, np.float64)[:sessions])
    nexts = target_next_items(target_scores, users, items)
    np.savez(path, slate_id=np.repeat(np.arange(n), k), position=np.tile(np.arange(k), n),
             action=np.maximum(items, 0).ravel(), reward=np.asarray(data.rewards, np.float64)[:sessions].ravel(),
             pscore=np.repeat(behaviour[:, -1], k), evaluation_policy_pscore=np.repeat(evaluation[:, -1], k),
             pscore_cascade=behaviour.ravel(), evaluation_policy_pscore_cascade=evaluation.ravel(),
             q_hat=np.where(viewed[..., None], model[None, None, :], 0.0).ravel(),
             evaluation_policy_action_dist=(nexts[..., None] == np.arange(a)).astype(np.float64).ravel(),
             len_list=k, n_actions=a)
    parts = ope.contributions(data, {"T": target}, np.inf, estimators=list(OBP_ESTIMATORS))
    summary = ope.summarise(ope.restrict(parts, np.arange(n)), np.inf)
    return {name: float(summary[name, "T"]["value"][0]) for name in OBP_ESTIMATORS}


def bench_obp(python: str, log, inputs, model, target_scores, sessions: int) -> tuple[dict | None, str]:
    """Run OBP's slate estimators (`OBP_ESTIMATORS`) in the peer environment on the exported sessions."""
    data, targets = inputs
    with tempfile.TemporaryDirectory() as folder:
        npz = os.path.join(folder, "slates.npz")
        simrec_values = export_for_obp(npz, log, data, targets["T"], model, target_scores, sessions)
        driver = os.path.join(folder, "driver.py")
        Path(driver).write_text(OBP_DRIVER)
        done = subprocess.run([python, driver, npz], capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        return None, done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
    out = json.loads(done.stdout.strip().splitlines()[-1])
    for name, value in simrec_values.items():
        out[name].update(simrec=value, relative_difference=abs(out[name]["value"] - value) / max(abs(value), 1e-12),
                         per_million=out[name]["seconds"] * PER / sessions)
    out["sessions"] = sessions
    return out, ""


@usage_errors
def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="simrec bench slate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=integer(1000), default=1_000_000, help="logged sessions (>= 1000)")
    parser.add_argument("--users", type=positive_int, default=1000)
    parser.add_argument("--items", type=integer(2), default=100, help="catalogue size A (>= 2)")
    parser.add_argument("--feed-length", type=positive_int, default=5, help="K (<= --items)")
    parser.add_argument("--obp-sessions", type=integer(2), default=20_000,
                        help="sessions OBP estimates on (>= 2; its Cascade-DR holds N·K·A floats twice)")
    parser.add_argument("--peer-venv", default=os.environ.get("SIMREC_OBP_VENV"))
    parser.add_argument("--setup-peer", action="store_true", help="create --peer-venv if missing")
    parser.add_argument("--repeats", type=positive_int, default=3, help="warm timed calls (median)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    if args.feed_length > args.items:
        parser.error(f"--feed-length {args.feed_length} exceeds --items {args.items}")
    if args.obp_sessions > args.sessions:
        parser.error(f"--obp-sessions {args.obp_sessions} exceeds --sessions {args.sessions}")

    print(f"simrec bench slate: {os.cpu_count()} CPUs; {args.sessions:,} sessions, {args.users:,} users, "
          f"{args.items:,} items, K = {args.feed_length}", flush=True)
    scenario, logger, target, log, model, tables = setting(args.sessions, args.users, args.items, args.feed_length)
    rows, inputs = bench_simrec(scenario, logger, target, log, model, args.repeats)
    python, reason = peer_python(args.peer_venv, args.setup_peer)
    obp = None
    if python:
        obp, reason = bench_obp(python, log, inputs, model, tables["target"], args.obp_sessions)

    print("\n| what | simrec (s per 10⁶ sessions) | OBP (s per 10⁶ sessions) | simrec's speed-up | "
          "relative difference |\n|---|---|---|---|---|")
    for row in rows:
        name = row.get("estimator")
        peer = obp.get(name) if obp and name else None
        if peer:
            print(f"| {row['what']} | {row['per_million']:.3f} | {peer['per_million']:.3f} | "
                  f"{peer['per_million'] / row['per_million']:,.0f}× | {peer['relative_difference']:.1e} |")
        else:
            print(f"| {row['what']} | {row['per_million']:.3f} | – | – | – |")
    if obp is None:
        print(f"\nobp unavailable: {reason}")
    else:
        worst = max(obp[name]["relative_difference"] for name in OBP_ESTIMATORS)
        print(f"\nOBP {obp['obp_version']} in {args.peer_venv}, on the first {obp['sessions']:,} sessions: its "
              f"SIPS, RIPS, SN-SIPS, SN-RIPS and Cascade-DR reproduce simrec's to a relative difference of "
              f"{worst:.1e} at most")
    if args.json:
        Path(args.json).write_text(json.dumps({"simrec": rows, "obp": obp}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
