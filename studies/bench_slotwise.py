"""Benchmark ``simrec bench slotwise``: simrec's estimators on slot-wise slates against Open Bandit
Pipeline's, on a log that Open Bandit Pipeline generates itself, and what each costs per 10⁶ rounds.

In the peer environment (``--peer-venv``, created as ``simrec bench feed`` documents), Open Bandit
Pipeline 0.5.7 (Saito et al. 2021) draws ``--rounds`` rounds of its `SyntheticSlateBanditDataset`
with factorisable slates (each of K = ``--slots`` slots draws one of ``--actions`` actions
independently, with replacement), binary rewards with the ``--reward-structure`` interaction and
its linear behaviour policy; the evaluation policy's logit is ``--similarity`` λ times the
behaviour's (WSDM'22's target family). OBP computes both policies' propensities
(`obtain_batch_bandit_feedback`, `obtain_pscore_given_evaluation_policy_logit`) and the
evaluation policy's action distribution at every slot (`calc_evaluation_policy_action_dist`).

simrec then estimates the evaluation policy's value from that log, with OBP's propensities as its
inputs: IPS (SIPS), IIPS and RIPS with `simrec.ope.trajectory_factorised_ips` (the per-slot
log-probabilities log π(a_k | x) are OBP's ``pscore_item_position``, each slot's marginal on a
factorisable slate; the action sets every slot, the slot alone, the slots above), and Cascade-DR
with `simrec.ope.trajectory_cascade_dr` (prefixes: the cumulative sums of those log-probabilities)
on a reward model q̂(k, a) computed here without simrec (the mean reward of action a at slot k, a
non-recursive model: Cascade-DR's formula agrees for any q̂). Side by side, OBP's
`SlateStandardIPS`, `SlateIndependentIPS`, `SlateRewardInteractionIPS` and
`SlateCascadeDoublyRobust` (given q̂ for every action at every slot) estimate the same, each timed
on its second call, simrec's after a warm-up (median of ``--repeats``). The run prints both sides'
seconds per 10⁶ rounds and the largest relative difference (OBP computes in float64, simrec's
weights in float32).

Usage: ``simrec bench slotwise [--rounds N] [--actions A] [--slots K] [--similarity λ]
[--reward-structure NAME] [--peer-venv PATH] [--setup-peer] [--repeats N] [--json PATH]``.
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
from simrec_studies.bench_slate import OBP_SLATE_ESTIMATES

PER = 1_000_000                          # costs are reported in seconds per PER rounds
ESTIMATORS = {"sips": "SlateStandardIPS", "iips": "SlateIndependentIPS", "rips": "SlateRewardInteractionIPS",
              "cascade_dr": "SlateCascadeDoublyRobust"}
REWARD_STRUCTURES = ("cascade_additive", "standard_additive", "cascade_decay", "standard_decay", "independent")

OBP_DRIVER = OBP_LOADER + OBP_SLATE_ESTIMATES + r'''
from obp.dataset.synthetic import logistic_reward_function
from obp.dataset.synthetic_slate import SyntheticSlateBanditDataset, linear_behavior_policy_logit
args = json.loads(sys.argv[1])
out = {"obp_version": __import__("importlib.metadata").metadata.version("obp")}
if args["mode"] == "generate":
    dataset = SyntheticSlateBanditDataset(
        n_unique_action=args["actions"], len_list=args["slots"], dim_context=5, reward_type="binary",
        reward_structure=args["reward_structure"], click_model=None, random_state=args["seed"], is_factorizable=True,
        base_reward_function=logistic_reward_function, behavior_policy_function=linear_behavior_policy_logit)
    feedback = dataset.obtain_batch_bandit_feedback(n_rounds=args["rounds"], return_pscore_item_position=True)
    behaviour_logit = linear_behavior_policy_logit(context=feedback["context"], action_context=dataset.action_context,
                                                   random_state=args["seed"])
    evaluation_logit = args["similarity"] * behaviour_logit
    pscore, pscore_item_position, pscore_cascade = dataset.obtain_pscore_given_evaluation_policy_logit(
        action=feedback["action"], evaluation_policy_logit_=evaluation_logit, return_pscore_item_position=True)
    action_dist = dataset.calc_evaluation_policy_action_dist(action=feedback["action"],
                                                             evaluation_policy_logit_=evaluation_logit)
    np.savez(args["npz"], **{k: feedback[k] for k in ("slate_id", "position", "action", "reward", "pscore",
                                                      "pscore_cascade", "pscore_item_position")},
             evaluation_policy_pscore=pscore, evaluation_policy_pscore_item_position=pscore_item_position,
             evaluation_policy_pscore_cascade=pscore_cascade, evaluation_policy_action_dist=action_dist,
             len_list=args["slots"], n_actions=args["actions"])
else:
    out.update(slate_estimates(dict(np.load(args["npz"])), list(args["estimators"])))
print(json.dumps(out))
'''


def _driver(python: str, folder: str, **args) -> dict:
    """Run OBP_DRIVER with ``args`` in the peer environment; its JSON output."""
    driver = os.path.join(folder, "driver.py")
    Path(driver).write_text(OBP_DRIVER)
    done = subprocess.run([python, driver, json.dumps(args)], capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def slot_reward_model(action: np.ndarray, reward: np.ndarray, num_actions: int) -> np.ndarray:
    """q̂(k, a): the mean logged reward of action a at slot k (0.5 where a never appears there).
    action, reward: [N, K] -> f64[K, A]."""
    k = action.shape[1]
    counts = np.zeros((k, num_actions))
    sums = np.zeros((k, num_actions))
    np.add.at(counts, (np.broadcast_to(np.arange(k), action.shape), action), 1.0)
    np.add.at(sums, (np.broadcast_to(np.arange(k), action.shape), action), reward)
    return np.divide(sums, counts, out=np.full((k, num_actions), 0.5), where=counts > 0)


def simrec_estimates(log: dict, repeats: int) -> tuple[dict, np.ndarray]:
    """simrec's estimates of the evaluation policy's value on OBP's log (module docstring), timed:
    {name: {value, seconds}}, and q̂ for every action at every row (OBP's q_hat, f64[N·K·A])."""
    from simrec import ope

    k, a = int(log["len_list"]), int(log["n_actions"])
    action = log["action"].reshape(-1, k)
    reward = log["reward"].reshape(-1, k).astype(np.float64)
    logging_slot = np.log(log["pscore_item_position"].reshape(-1, k))
    target_slot = np.log(log["evaluation_policy_pscore_item_position"].reshape(-1, k))
    model = slot_reward_model(action, reward, a)                                     # [K, A]
    target_dist = log["evaluation_policy_action_dist"].reshape(-1, k, a)
    predicted = model[np.arange(k), action]
    baseline = np.sum(target_dist * model[None], axis=2)
    viewed = np.ones(action.shape, bool)
    calls = {name: (lambda sets=ope.slot_action_sets(behaviour, k): ope.trajectory_factorised_ips(
                 reward, logging_slot, target_slot, sets).block_until_ready())
             for name, behaviour in (("sips", "standard"), ("iips", "independent"), ("rips", "cascade"))}
    calls["cascade_dr"] = lambda: ope.trajectory_cascade_dr(
        reward, viewed, np.cumsum(logging_slot, axis=1), np.cumsum(target_slot, axis=1), predicted,
        baseline).block_until_ready()
    out = {}
    for name, call in calls.items():
        seconds, compile_s, values = timed(call, repeats)
        out[name] = {"value": float(np.mean(np.asarray(values, np.float64))), "seconds": seconds,
                     "compile_s": compile_s}
    return out, np.broadcast_to(model[None], (action.shape[0], k, a)).ravel()


@usage_errors
def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="simrec bench slotwise", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=integer(100), default=100_000, help="rounds OBP generates (>= 100)")
    parser.add_argument("--actions", type=integer(2), default=5, help="actions A (>= 2)")
    parser.add_argument("--slots", type=positive_int, default=5, help="slots K")
    parser.add_argument("--similarity", type=float, default=-0.5, help="λ: the target's logit is λ times the logger's")
    parser.add_argument("--reward-structure", default="cascade_additive", choices=REWARD_STRUCTURES)
    parser.add_argument("--seed", type=positive_int, default=1)
    parser.add_argument("--peer-venv", default=os.environ.get("SIMREC_OBP_VENV"))
    parser.add_argument("--setup-peer", action="store_true", help="create --peer-venv if missing")
    parser.add_argument("--repeats", type=positive_int, default=3, help="warm timed calls (median)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    print(f"simrec bench slotwise: {os.cpu_count()} CPUs; {args.rounds:,} rounds, A = {args.actions}, "
          f"K = {args.slots}, λ = {args.similarity}, {args.reward_structure}", flush=True)
    python, reason = peer_python(args.peer_venv, args.setup_peer)
    if python is None:
        print(f"obp unavailable: {reason}; this benchmark needs its generator")
        return 0
    with tempfile.TemporaryDirectory() as folder:
        npz = os.path.join(folder, "slates.npz")
        try:
            _driver(python, folder, mode="generate", npz=npz, rounds=args.rounds, actions=args.actions,
                    slots=args.slots, similarity=args.similarity, reward_structure=args.reward_structure,
                    seed=args.seed)
            log = dict(np.load(npz))
            ours, q_hat = simrec_estimates(log, args.repeats)
            np.savez(npz, **log, q_hat=q_hat)
            peer = _driver(python, folder, mode="estimate", npz=npz, estimators=list(ESTIMATORS))
        except RuntimeError as error:
            print(f"obp failed: {error}")
            return 1
    print("\n| estimator | simrec (s per 10⁶ rounds) | OBP (s per 10⁶ rounds) | simrec's speed-up | simrec | OBP | "
          "relative difference |\n|---|---|---|---|---|---|---|")
    worst = 0.0
    for name, obp_name in ESTIMATORS.items():
        mine, theirs = ours[name], peer[name]
        difference = abs(mine["value"] - theirs["value"]) / max(abs(theirs["value"]), 1e-12)
        worst = max(worst, difference)
        mine["per_million"], theirs["per_million"] = (s["seconds"] * PER / args.rounds for s in (mine, theirs))
        theirs["relative_difference"] = difference
        print(f"| {name} ({obp_name}) | {mine['per_million']:.3f} | {theirs['per_million']:.3f} | "
              f"{theirs['per_million'] / mine['per_million']:,.0f}× | {mine['value']:.6f} | {theirs['value']:.6f} | "
              f"{difference:.1e} |")
    print(f"\nOBP {peer['obp_version']} in {args.peer_venv}: on its own factorisable log of {args.rounds:,} rounds, "
          f"its SIPS, IIPS, RIPS and Cascade-DR reproduce simrec's to a relative difference of {worst:.1e} at most")
    if args.json:
        Path(args.json).write_text(json.dumps({"simrec": ours, "obp": peer, "args": vars(args)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
