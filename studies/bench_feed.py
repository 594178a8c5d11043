"""Benchmark ``simrec bench feed``: session simulation rate and the clipped-DCG sweep.

simrec, timed after a warm-up call: every figure is the median of repeated calls on warm
compilations, and the first call's extra time (compilation) is reported separately. Each timed
call ends with the results on the host or `block_until_ready`:

* sessions simulated per second **end to end**: the whole public call `feed.simulate(key,
  scenario, policy, n)` at its defaults, which computes the logging-exposure table ε₀ itself
  (`feed.logging_exposure_table`: exact in closed form for Sort; for Plackett–Luce exact by the
  exponential race at K = 10 and a 100-sample Monte Carlo mean at K = 100 and 1000, where the
  race would cost k · K per node), for feed lengths K = 10, 100, 1000 (catalogue A =
  max(100, K), 1000 users, two reward signals, a position-based model with the log discount),
  under a deterministic (Sort) and a Plackett–Luce (T = 1) logging policy; the ratios against
  OBP use this rate. Also reported, labelled as such: the table on its own, and the
  **generation-only** rate of `simulate` given the table. Per call `simulate` builds the
  policy's `context_tables` (Sort order, or the alias tables of the PL softmax) and then draws
  sessions in jitted chunks: one Threefry word per uniform, the scroll depth first, and for PL
  only the viewed ranks, by first appearances of alias-table draws (1.5 K draws for K = 10;
  for K = 100 and 1000, 48 draws cover the first ~32 ranks and the sessions that scroll deeper
  are completed by Gumbel-top-K);
* for K = 10, the intended multi-day usage, timed whole: one `logging_exposure_table` and
  ``--days`` calls of `simulate` with ``--sessions`` sessions each, all given that table;
* the clipped-IPS DCG sweep over 14 values of m on 10^6 logged sessions (K = 10, Plackett–Luce
  logging, a deterministic target): `simrec.ope.dcg_sweep` (estimate and standard error for every
  m in one jitted pass over blocks of trajectories, given the target exposures of the logged
  items, as OBP's estimators are given the evaluation policy's propensities); the
  target-exposure lookup, the doubly robust sweep `dr_sweep` (with a reward model) and the
  per-trajectory values `trajectory_dcg` (f32[14, N]) are timed too.

Side by side, in the same run, Open Bandit Pipeline 0.5.7 (Saito et al. 2021): its
`SyntheticSlateBanditDataset` (len_list 10, 100 actions, PBM click model, binary independent
rewards, linear behaviour-policy logits) generating rounds (a) without repeats (sequential
softmax, i.e. Plackett–Luce logging) and without propensities, and (b) with the per-position
propensities that IIPS needs, which OBP can only compute for its factorizable per-slot softmax
policy (for (a) it enumerates all 100!/90! slates); and `SlateIndependentIPS.estimate_policy_value`
called once per m (clipping 1/π₀ at m by flooring π₀ at 1/m) on simrec's own log: the first
``--iips-rounds`` sessions of the K = 10 Plackett–Luce log above, converted with
`simrec.obp.to_bandit_feedback` (one OBP round per viewed rank, slate_id = session, pscore = the
logging exposure ε₀) and saved as an ``.npz`` that the peer reads, with the target's exposure of
each round as the evaluation policy's pscore. On that input OBP's IIPS is the same estimator as
simrec's DCG (`simrec.obp`), so the run also checks that OBP reproduces simrec's 14 estimates
(largest relative difference printed; float32 vs float64 arithmetic only).

OBP pins Python < 3.11 and old numpy/torch, so it runs in its own virtual environment, driven by
this benchmark through a subprocess: pass ``--peer-venv PATH`` (or set ``SIMREC_OBP_VENV``), and
``--setup-peer`` to create it there with

    python3 -m venv PATH
    PATH/bin/pip install "numpy<2" scipy scikit-learn "pandas<2.3" tqdm pyyaml matplotlib
    PATH/bin/pip install --no-deps --ignore-requires-python obp==0.5.7

(on Python 3.11; obp's pure-Python code runs there). obp's package ``__init__`` imports torch,
which the slate simulator and estimators never use, and PyPI's torch wheels pull in gigabytes of
CUDA libraries; the driver therefore loads ``obp.dataset.synthetic_slate`` and
``obp.ope.estimators_slate`` directly, with a two-attribute stand-in for ``torch`` that only
satisfies obp.utils' type annotations. Without a usable environment the benchmark prints
``obp unavailable: <reason>`` and reports simrec's own numbers.

Usage: ``simrec bench feed [--sessions N] [--users X] [--peer-venv PATH] [--setup-peer]
[--obp-rounds N] [--iips-rounds N] [--repeats N] [--days D] [--json PATH]``. The machine is shared: figures
vary between runs, so compare simrec and OBP within one run.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from simrec_studies._bench_args import Parser, integer, positive_int, usage_errors

M_VALUES = (1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 50.0, 100.0, 200.0, 1000.0, float("inf"))
FEEDS = ((10, 1.0), (100, 0.1), (1000, 0.02))          # feed length K, share of --sessions simulated
PEER_PACKAGES = ['numpy<2', 'scipy', 'scikit-learn', 'pandas<2.3', 'tqdm', 'pyyaml', 'matplotlib']

#: the start of every OBP driver: obp's modules without its package __init__s (which import torch)
OBP_LOADER = r'''
import importlib.util, json, os, pathlib, sys, time, types
os.environ["TQDM_DISABLE"] = "1"
torch = types.ModuleType("torch")              # obp.utils only annotates with torch.Tensor
torch.Tensor = torch.tensor = type("Tensor", (), {})
sys.modules["torch"] = torch
root = pathlib.Path(importlib.util.find_spec("obp").submodule_search_locations[0])
for name in ("obp", "obp.dataset", "obp.ope"):   # skip package __init__s that import torch models
    module = types.ModuleType(name)
    module.__path__ = [str(root.joinpath(*name.split(".")[1:]))]
    sys.modules[name] = module
import numpy as np
'''

OBP_DRIVER = OBP_LOADER + r'''
from obp.dataset.synthetic import logistic_reward_function
from obp.dataset.synthetic_slate import SyntheticSlateBanditDataset, linear_behavior_policy_logit
from obp.ope.estimators_slate import SlateIndependentIPS
args = json.loads(sys.argv[1])
def make(factorizable):
    return SyntheticSlateBanditDataset(
        n_unique_action=100, len_list=10, dim_context=5, reward_type="binary",
        reward_structure="independent", click_model="pbm", random_state=0, is_factorizable=factorizable,
        base_reward_function=logistic_reward_function, behavior_policy_function=linear_behavior_policy_logit)
out = {"obp_version": __import__("importlib.metadata").metadata.version("obp")}
n = args["rounds"]
dataset = make(False)        # slates without repeats, sequential softmax: Plackett-Luce logging
start = time.perf_counter()
dataset.obtain_batch_bandit_feedback(n_rounds=n, return_pscore_item_position=False)
out["rounds_per_s_plain"] = n / (time.perf_counter() - start)
dataset = make(True)         # per-slot softmax: the only policy whose pscore_item_position is tractable
start = time.perf_counter()
feedback = dataset.obtain_batch_bandit_feedback(n_rounds=n, return_pscore_item_position=True)
out["rounds_per_s_with_pscore"] = n / (time.perf_counter() - start)
log = np.load(args["npz"])                    # simrec's log, simrec.obp.to_bandit_feedback
slate_id, reward, position = log["slate_id"], log["reward"], log["position"]
behaviour, target = log["pscore_item_position"], log["evaluation_policy_pscore_item_position"]
iips = SlateIndependentIPS(len_list=int(log["len_list"]))
times, values = [], []
for m in args["m"]:
    start = time.perf_counter()
    values.append(float(iips.estimate_policy_value(
        slate_id=slate_id, reward=reward, position=position,
        pscore_item_position=np.maximum(behaviour, 1.0 / m),
        evaluation_policy_pscore_item_position=target)))
    times.append(time.perf_counter() - start)
out["iips_seconds"] = times
out["iips_values"] = values
print(json.dumps(out))
'''


def random_feed_tables(num_users: int, num_items: int, seed: int = 0):
    """Random like and watch qualities and noisy logging scores, each f32[num_users, num_items]."""
    rng = np.random.default_rng(seed)
    like = rng.beta(1, 30, (num_users, num_items)).astype(np.float32)
    watch = rng.beta(2, 5, (num_users, num_items)).astype(np.float32)
    scores = (np.log(watch) + rng.normal(0, 0.5, watch.shape)).astype(np.float32)
    return like, watch, scores


def timed(fn, repeats: int):
    """(median seconds of `repeats` warm calls, extra seconds of the first call, last output)."""
    start = time.perf_counter()
    fn()                                                      # warm-up: compilation
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    seconds = float(np.median(times))
    return seconds, max(first - seconds, 0.0), out


def bench_simrec(num_sessions: int, num_users: int, repeats: int, days: int) -> tuple[list[dict], dict, tuple | None]:
    import jax

    from simrec import feed

    rows, sweep, peer = [], {}, None
    for K, share in FEEDS:
        A = max(100, K)
        n = max(1, int(num_sessions * share))
        like, watch, scores = random_feed_tables(num_users, A)
        scenario = feed.Scenario(feed.Logarithmic(), (feed.from_table(like), feed.from_table(watch)),
                                 np.full(num_users, 1.0 / num_users, np.float32), ("like", "watch"))
        for name, ranker in (("deterministic", feed.Sort(feed.from_table(scores))),
                             ("plackett-luce", feed.PlackettLuce(feed.from_table(scores), 1.0))):
            policy = feed.Policy(feed.all_items(A), ranker, K)
            key = jax.random.key(2)
            # end to end: the public call at its defaults, its logging-exposure table included
            seconds, compile_s, log = timed(lambda: jax.block_until_ready(
                feed.simulate(key, scenario, policy, n)), repeats)
            table_s, _, table = timed(lambda: jax.block_until_ready(
                feed.logging_exposure_table(key, scenario, policy)), 1)          # compiled by the call above
            generation_s, _, _ = timed(lambda: jax.block_until_ready(
                feed.simulate(key, scenario, policy, n, logging_exposure=table.mean)), repeats)
            exact = bool(np.all(np.asarray(table.standard_error) == 0))
            rows.append({"feed_length": K, "items": A, "logging": name, "sessions": n, "seconds": seconds,
                         "sessions_per_s": n / seconds, "compile_s": compile_s, "exposure_table_s": table_s,
                         "exposure_exact": exact, "exposure_max_relative_se": float(np.max(
                             np.asarray(table.standard_error) / np.maximum(np.asarray(table.mean), 1e-30))),
                         "generation_s": generation_s, "generation_sessions_per_s": n / generation_s})
            print(f"  simrec K={K:<5} {name:<14} {n:>9,} sessions end to end in {seconds:7.3f}s "
                  f"= {n / seconds:>12,.0f}/s (compile {compile_s:.2f}s); ε₀ table {table_s:.3f}s "
                  f"({'exact' if exact else 'Monte Carlo'}); generation only {n / generation_s:>12,.0f}/s", flush=True)
            if K == 10:
                rows.append(_bench_days(scenario, policy, name, n, days, repeats))
            if K == 10 and name == "plackett-luce":
                sweep, peer = _bench_sweep(log, scenario, feed.Policy(feed.all_items(A), feed.Sort(feed.from_table(
                    watch)), K), feed.from_table(0.5 * watch), num_users, max(repeats, 5))
    return rows, sweep, peer


def _bench_days(scenario, policy, name: str, n: int, days: int, repeats: int) -> dict:
    """`days` days of n sessions of one logger with one logging-exposure table (the intended
    multi-day usage: the table depends only on the policy and the view model), timed whole."""
    import jax

    from simrec import feed

    def run():
        key = jax.random.key(3)
        table = feed.logging_exposure_table(key, scenario, policy).mean
        return jax.block_until_ready([feed.simulate(jax.random.fold_in(key, d), scenario, policy, n, day=d,
                                                    logging_exposure=table) for d in range(days)])

    seconds, compile_s, _ = timed(run, repeats)
    total = days * n
    print(f"  simrec K={policy.feed_length:<5} {name:<14} {days} days x {n:,} sessions, one ε₀ table: "
          f"{seconds:7.3f}s = {total / seconds:>12,.0f}/s", flush=True)
    return {"feed_length": policy.feed_length, "items": feed.num_items(policy), "logging": name, "days": days,
            "sessions": total, "seconds": seconds, "sessions_per_s": total / seconds, "compile_s": compile_s}


def _first_sessions(log, n: int):
    """The log's first n sessions."""
    from simrec import feed

    return feed.Log(log.users[:n], log.items[:n], log.viewed[:n], log.rewards[:, :n], log.day[:n],
                    log.logging_exposure[:n], log.signals)


def export_for_obp(path: str, log, target_exposure, signal: int, sessions: int) -> dict:
    """Save the first `sessions` sessions of `log` in OBP's slate format (`simrec.obp`) to the
    .npz `path`, with the target's exposure of every round as the evaluation pscore; return
    simrec's clipped-DCG estimates of the same sessions for every m (what OBP must reproduce)."""
    from simrec import obp, ope

    log = _first_sessions(log, sessions)
    target_exposure = np.asarray(target_exposure)[:sessions]
    feedback = obp.to_bandit_feedback(log, signal=signal)
    np.savez(path, slate_id=feedback["slate_id"], reward=feedback["reward"], position=feedback["position"],
             len_list=feedback["len_list"], pscore_item_position=feedback["pscore_item_position"],
             evaluation_policy_pscore_item_position=obp.round_values(log, target_exposure).astype(np.float64))
    estimate = ope.dcg_sweep(log.rewards[signal], log.logging_exposure, target_exposure, log.viewed,
                             np.array(M_VALUES))
    return {"sessions": int(log.users.shape[0]), "rounds": feedback["n_rounds"],
            "simrec_values": [float(v) for v in estimate.value]}


def _bench_sweep(log, scenario, target, reward_model, num_users: int, repeats: int) -> tuple[dict, tuple]:
    import jax

    from simrec import feed, ope

    target_table = feed.exposure(None, target, scenario.view, np.arange(num_users)).mean
    m = np.array(M_VALUES)
    lookup_s, _, target_exposure = timed(
        lambda: feed.exposure_of(target_table, log.users, log.items).block_until_ready(), repeats)
    rewards = log.rewards[1]
    sweep_s, sweep_compile_s, estimate = timed(lambda: ope.dcg_sweep(
        rewards, log.logging_exposure, target_exposure, log.viewed, m), repeats)
    catalogue = np.arange(reward_model.num_items, dtype=np.int32)
    direct = ope.direct_method(feed.item_values(reward_model, jax.numpy.arange(num_users), np.broadcast_to(
        catalogue, (num_users, catalogue.size))), target_table)[log.users]
    predicted = feed.item_values(reward_model, log.users, jax.numpy.maximum(log.items, 0))
    dr_s, dr_compile_s, dr = timed(lambda: ope.dr_sweep(
        rewards, log.logging_exposure, target_exposure, log.viewed, predicted, direct, m), repeats)
    per_trajectory_s, _, _ = timed(lambda: ope.trajectory_dcg(
        rewards, log.logging_exposure, target_exposure, log.viewed, m).block_until_ready(), repeats)
    truth = feed.online_value(None, scenario, target).mean[1]
    n = int(log.users.shape[0])
    print(f"  simrec clipped-DCG sweep: {len(M_VALUES)} m values on {n:,} sessions in {sweep_s:.3f}s "
          f"(compile {sweep_compile_s:.2f}s; + {lookup_s:.3f}s target-exposure lookup); m=∞: "
          f"{estimate.value[-1]:.4f} ± {estimate.standard_error[-1]:.4f}, online truth {truth:.4f}", flush=True)
    print(f"  simrec doubly robust sweep (q̂ = watch/2): {dr_s:.3f}s (compile {dr_compile_s:.2f}s); m=∞: "
          f"{dr.value[-1]:.4f} ± {dr.standard_error[-1]:.4f}; per-trajectory DCG values [14, N]: "
          f"{per_trajectory_s:.3f}s", flush=True)
    return {"sessions": n, "m_values": len(M_VALUES), "seconds": sweep_s, "compile_seconds": sweep_compile_s,
            "target_lookup_seconds": lookup_s, "dr_seconds": dr_s, "per_trajectory_seconds": per_trajectory_s,
            "estimate_m_inf": float(estimate.value[-1]), "se_m_inf": float(estimate.standard_error[-1]),
            "dr_m_inf": float(dr.value[-1]), "dr_se_m_inf": float(dr.standard_error[-1]),
            "online_truth": float(truth)}, (log, target_exposure)


def peer_python(venv: str | None, setup: bool) -> tuple[str | None, str]:
    """(the peer environment's python, "") or (None, why it is unusable); with ``setup``, create the
    environment at ``venv`` first (module docstring)."""
    if not venv:
        return None, "no peer environment (pass --peer-venv PATH or set SIMREC_OBP_VENV)"
    python = Path(venv) / "bin" / "python"
    if not python.exists():
        if not setup:
            return None, f"{python} does not exist (add --setup-peer to create it)"
        print(f"creating the OBP environment in {venv} ...", flush=True)
        steps = [[sys.executable, "-m", "venv", venv],
                 [str(python), "-m", "pip", "install", "-q", *PEER_PACKAGES],
                 [str(python), "-m", "pip", "install", "-q", "--no-deps", "--ignore-requires-python", "obp==0.5.7"]]
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True)
            if done.returncode != 0:
                return None, f"setup step {' '.join(step[:4])} failed: {done.stderr.strip()[-300:]}"
    return str(python), ""


def bench_obp(python: str, rounds: int, peer) -> tuple[dict | None, str]:
    """Run the OBP driver in the peer environment; `peer` = (simrec's K = 10 log, the target's
    exposures of its items, the number of sessions to export) for the IIPS comparison."""
    log, target_exposure, sessions = peer
    with tempfile.TemporaryDirectory() as folder:
        npz = os.path.join(folder, "simrec_log.npz")
        exported = export_for_obp(npz, log, target_exposure, 1, sessions)
        driver = os.path.join(folder, "driver.py")
        Path(driver).write_text(OBP_DRIVER)
        args = json.dumps({"rounds": rounds, "npz": npz, "m": list(M_VALUES)})
        done = subprocess.run([python, driver, args], capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        return None, done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
    out = json.loads(done.stdout.strip().splitlines()[-1])
    simrec_values, obp_values = np.array(exported["simrec_values"]), np.array(out["iips_values"])
    out.update(exported, iips_max_relative_difference=float(np.max(
        np.abs(obp_values - simrec_values) / np.maximum(np.abs(simrec_values), 1e-12))))
    return out, ""


@usage_errors
def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="simrec bench feed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=integer(1000), default=1_000_000,
                        help="sessions at K = 10 (K = 100: 10 %%, K = 1000: 2 %%); >= 1000")
    parser.add_argument("--users", type=positive_int, default=1000)
    parser.add_argument("--peer-venv", default=os.environ.get("SIMREC_OBP_VENV"))
    parser.add_argument("--setup-peer", action="store_true", help="create --peer-venv if missing")
    parser.add_argument("--obp-rounds", type=integer(10), default=5_000, help="rounds OBP generates per timing (>= 10)")
    parser.add_argument("--iips-rounds", type=integer(2), default=100_000,
                        help="sessions of simrec's log converted for OBP's IIPS (slates; >= 2)")
    parser.add_argument("--repeats", type=positive_int, default=2, help="warm timed calls per simulation (median)")
    parser.add_argument("--days", type=positive_int, default=7, help="days of --sessions sessions each in the "
                        "multi-day rows (K = 10, one logging-exposure table)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)

    print(f"simrec bench feed: {os.cpu_count()} CPUs", flush=True)
    rows, sweep, peer = bench_simrec(args.sessions, args.users, args.repeats, args.days)
    python, reason = peer_python(args.peer_venv, args.setup_peer)
    obp = None
    if python:
        obp, reason = bench_obp(python, args.obp_rounds, (*peer, min(args.iips_rounds, args.sessions)))
    result = {"simrec": rows, "sweep": sweep, "obp": obp}

    print("\n| what | simrec end to end (sessions/s) | compile (s) | ε₀ table (s) | generation only (sessions/s) "
          "| OBP (rounds/s) | ratio end to end | ratio generation only |\n|---|---|---|---|---|---|---|---|")
    peers = (("PL, no propensities", "rounds_per_s_plain"),
             ("per-slot softmax + pscore_item_position", "rounds_per_s_with_pscore"))
    for row in rows:
        if "days" in row:
            line = (f"| K={row['feed_length']}, {row['logging']}, {row['days']} days x "
                    f"{row['sessions'] // row['days']:,} sessions, one ε₀ table | {row['sessions_per_s']:,.0f} | "
                    f"{row['compile_s']:.1f} | (once) | – |")
            generation = None
        else:
            line = (f"| K={row['feed_length']}, {row['logging']}, {row['sessions']:,} sessions | "
                    f"{row['sessions_per_s']:,.0f} | {row['compile_s']:.1f} | {row['exposure_table_s']:.3f} "
                    f"({'exact' if row['exposure_exact'] else 'Monte Carlo'}) | "
                    f"{row['generation_sessions_per_s']:,.0f} |")
            generation = row["generation_sessions_per_s"]
        if obp and row["feed_length"] == 10:
            for label, key in peers:
                ratio = f"{generation / obp[key]:,.0f}×" if generation else "–"
                print(f"{line} {obp[key]:,.0f} ({label}) | {row['sessions_per_s'] / obp[key]:,.0f}× | {ratio} |")
        else:
            print(f"{line} – | – | – |")
    if sweep:
        print("\n| what | simrec | simrec compile (s) | OBP | ratio |\n|---|---|---|---|---|")
        what = f"14-m clipped-DCG sweep, {sweep['sessions']:,} sessions (s)"
        line = f"| {what} | {sweep['seconds']:.3f} | {sweep['compile_seconds']:.1f} |"
        if obp:
            one = float(np.median(obp["iips_seconds"]))
            print(f"{line} {one:.3f} (one IIPS call, {obp['sessions']:,} simrec sessions = "
                  f"{obp['rounds']:,} rounds); "
                  f"{sum(obp['iips_seconds']):.3f} (14 calls) | {one / sweep['seconds']:.1f}× |")
        else:
            print(f"{line} – | – |")
        print(f"| 14-m doubly robust sweep, {sweep['sessions']:,} sessions (s) | {sweep['dr_seconds']:.3f} | – | – | – |")
    if obp is None:
        print(f"\nobp unavailable: {reason}")
    else:
        plain = obp["rounds_per_s_plain"]
        result["ratios"] = {"sweep_speedup_vs_one_iips_call": float(np.median(obp["iips_seconds"])) / sweep["seconds"]}
        for row in rows:
            if row["feed_length"] == 10:
                what = f"{row['logging']}_{row['days']}_days" if "days" in row else row["logging"]
                result["ratios"][f"end_to_end_{what}_vs_obp_plain"] = row["sessions_per_s"] / plain
                if "days" not in row:
                    result["ratios"][f"generation_only_{what}_vs_obp_plain"] = row["generation_sessions_per_s"] / plain
        print(f"\nOBP {obp['obp_version']} in {args.peer_venv}; its IIPS on simrec's converted log "
              f"reproduces simrec's 14 clipped-DCG estimates to a relative difference of "
              f"{obp['iips_max_relative_difference']:.1e}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
