"""Benchmark ``simrec bench scale``: time and peak memory against work, devices, and a paper-sized day.

Writes ``results/scale/`` (or ``--out``): tables as CSV + Markdown + LaTeX, a log-log figure,
``README.md`` and ``manifest.json``, staged and swapped into place as one set (`simrec.output`).

1. **Stages against work.** Each point runs in a fresh Python process, so one stage's buffers and
   compilations never count towards another's memory. Inside it the work is timed after a warm-up
   call (`simrec_studies.bench_feed.timed`: median of ``--repeats`` warm calls; the first call's
   extra time, compilation, is reported apart), and memory is the child's peak resident set
   (``ru_maxrss``) above its resident set after importing JAX and simrec. XLA's CPU buffers live
   in that resident set; ``jax.devices()[0].memory_stats()`` is recorded when the backend gives
   it (on CPU it is None). Stages and their work:

   * ``simulate``: `simrec.feed.simulate` of N sessions (feed length 10, 1000 users x 100 items, two
     signals, logarithmic view model, a deterministic logger and its exact exposure table passed as
     ``logging_exposure``); work = N, 10^4 ... 10^7. The returned log is O(N K), so memory grows
     with N by design;
   * ``sweep``: `simrec.ope.dcg_sweep`, the clipped-DCG estimate for the 14 values of m of
     ``bench feed``, on N random trajectories of length 10; work = N, 10^4 ... 10^7;
   * ``metrics``: `simrec.metrics.evaluate` (ADG, nDCG, AP, ATOP, AUC, Recall@10, nDCG@10) of the
     oracle scores of a `simrec.procedural` world, scored block by block by
     `simrec.procedural.score_function`, against its prior-relevant sets (CSR); 10^4 items, U users;
     work = U x 10^4 score entries, 10^6 ... 10^8. Memory is bounded by the block of users, not U;
   * ``opt_adg``: one epoch of MF-ADG (`simrec.models.fit`, `OptADG`) on the observed sets of a
     procedural movielens-like world of U users x 5000 items; work = sampled (u, i⁺) pairs (= the
     observed positives). Memory holds the factors and the positives, O((U + I) d + nnz).

   The exponent b of time ~ work^b (and of peak memory above the baseline) is the least-squares
   slope on log10 of the medians (`simrec.reporting.loglog_fit`), with its standard error; b ≈ 1 is linear work.

2. **Devices.** The ``simulate`` stage at ``--device-sessions`` sessions in subprocesses with
   ``XLA_FLAGS=--xla_force_host_platform_device_count=N``, N = 1, 2, 4, 8: sessions per second
   and a SHA-256 of the log's arrays, which must be the same for every N. On this 2-core machine
   the emulated devices share the cores, so the table checks correctness and overhead, never a
   speed-up. Whether simrec shards the batch axis (``simrec.sharding`` present) is recorded.

3. **Paper scenario.** One day of the headline study (`correlation`: log a day with a logging
   policy, estimate a target's online reward by clipped DCG for the 14 values of m, beside the
   exact online values) on a platform sized like Jeunen et al.'s (10^6 users, 10^5 items,
   10^7 sessions a day). The world is a `simrec.procedural.ProceduralWorld`, so no users x items
   table exists. `feed.simulate` records logging exposures from a table f32[X, A], impossible at
   10^6 x 10^5; the scenario therefore restricts each user to a candidate set of k = K slots (a
   retrieval stage): slot j of user x is item (o_x + j s) mod I with o_x drawn from
   fold_in(key, x) and s coprime with I, the feed's catalogue is the k slots, and every table
   (exposures, ranked slots) is X x k. The logger shows the slots in retrieval order (Sort by
   -slot), the target sorts them by true quality; both show every candidate, so the logging
   exposure is positive wherever the target's is. This is the limitation to state: exposures of
   items outside a user's candidate set are not modelled. Sessions are simulated and reduced
   chunk by chunk (`feed.session_chunks`), so memory is O(X k + chunk), and the day's estimate
   pools the chunks' `ope.dcg_sweep` estimates (mean weighted by chunk size; standard error
   sqrt(sum n_c^2 se_c^2) / N). ``--paper-sessions`` sets the demonstrated day (default: the
   largest that ran in ten minutes here); the estimate for 10^7 sessions and other hardware is
   the measured cost per session scaled by the measured ``simulate`` / ``sweep`` exponents and by
   an assumed device throughput (tables state which numbers are measured and which assumed).

Usage: ``simrec bench scale [--out DIR] [--quick] [--repeats R] [--paper-sessions N]
[--device-sessions N] [--seed S]``. ``--quick`` is a smoke run (tiny sizes, seconds).
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simrec.output import RESULTS, OutputFolder, atomic_write_text, write_figure, write_results_index, write_table
from simrec.reporting import loglog_fit
from simrec_studies._bench_args import Parser, integer, positive_int, usage_errors
from simrec_studies.bench_feed import M_VALUES, random_feed_tables, timed

FEED_LENGTH = 10
METRIC_ITEMS = 10_000
OPT_ADG_ITEMS = 5_000
DEVICE_COUNTS = (1, 2, 4, 8)
PAPER_USERS, PAPER_ITEMS, PAPER_SESSIONS = 1_000_000, 100_000, 10_000_000
DEMO_SESSIONS = 50_000_000            # the demonstrated day: 5 paper days' sessions, ~7 min here
PAPER_DAYS = 28                       # the correlation study's default long_days
GPU_SPEEDUPS = (10.0, 50.0)           # assumed throughput of one GPU relative to this 2-core CPU
HOSTS_GPUS = ((1, 1), (4, 8))         # (hosts, GPUs per host) of the estimate
SLOT_STRIDE = 7919                    # s of the candidate slots (a prime)


@dataclass(frozen=True)
class Stage:
    """A timed stage: what its work counts and the sizes of the default and quick runs."""
    work: str
    sizes: tuple[int, ...]
    quick_sizes: tuple[int, ...]


STAGES = {
    "simulate": Stage("sessions", (10_000, 100_000, 1_000_000, 10_000_000), (1_000, 4_000)),
    "sweep": Stage("trajectories x 14 m", (10_000, 100_000, 1_000_000, 10_000_000), (1_000, 4_000)),
    "metrics": Stage("score entries", (100, 316, 1_000, 3_162, 10_000), (20, 80)),            # users of 10^4 items
    "opt_adg": Stage("sampled pairs", (1_000, 3_162, 10_000, 31_623), (100, 400)),  # users of 5000 items
}


# --------------------------------------------------------------------------------------------
# Pure helpers: fits, estimates, hashes
# --------------------------------------------------------------------------------------------

def exponents_table(points):
    """Per stage, the fitted exponents against work of the time, of the peak memory above the
    import baseline (inputs and work), and of the work's own memory above its inputs.

    points: DataFrame with columns stage, work, seconds, baseline_rss_mb, peak_rss_mb, work_mb (one
    row per size). Memory below 1 MB is floored at 1 MB (resident-set noise). ``time_exponent_top``
    is the slope between the two largest sizes, where fixed per-call costs (dispatch, host
    transfers) no longer flatten the curve."""
    import pandas as pd
    rows = []
    for stage, group in points.groupby("stage", sort=False):
        largest = group.work.argmax()
        top = group.sort_values("work").tail(2)
        fits = {name: loglog_fit(group.work, values) for name, values in (
            ("time", group.seconds), ("memory", (group.peak_rss_mb - group.baseline_rss_mb).clip(lower=1.0)),
            ("work_memory", group.work_mb.clip(lower=1.0)))}
        rows.append({"stage": stage, "work": STAGES[stage].work, "sizes": len(group),
                     "work_min": int(group.work.min()), "work_max": int(group.work.max()),
                     **{f"{name}_exponent{suffix}": value for name, fit in fits.items()
                        for suffix, value in (("", fit.exponent), ("_se", fit.standard_error))},
                     "time_exponent_top": loglog_fit(top.work, top.seconds).exponent,
                     "seconds_at_max": float(group.seconds.iloc[largest]),
                     "us_per_unit_at_max": 1e6 * float(group.seconds.iloc[largest] / group.work.iloc[largest]),
                     "peak_rss_mb_at_max": float(group.peak_rss_mb.iloc[largest]),
                     "work_mb_at_max": float(group.work_mb.iloc[largest])})
    return pd.DataFrame(rows)


def scaled_seconds(seconds: float, work: float, target_work: float, exponent: float) -> float:
    """seconds · (target_work / work)^exponent: a measured cost carried to another size."""
    if not (seconds >= 0 and work > 0 and target_work > 0 and math.isfinite(exponent)):
        raise ValueError("scaled_seconds needs seconds >= 0, positive work sizes and a finite exponent")
    return seconds * (target_work / work) ** exponent


def paper_estimate(demo: dict, session_exponent: float, *, users: int = PAPER_USERS,
                   sessions: int = PAPER_SESSIONS, days: int = PAPER_DAYS,
                   speedups=GPU_SPEEDUPS, hosts_gpus=HOSTS_GPUS):
    """Estimated cost of the paper scenario from the demonstrated day.

    demo: the measured day (keys users, sessions, setup_s = tables for every user, sessions_s =
    simulation and estimation). On hardware with G devices, each r times this CPU's throughput:

        T_day = setup_s · (users / demo users) / r  +  sessions_s · (sessions / demo sessions)^b / (r G)

    with b = `session_exponent` (measured); the setup (per-user tables) is not split over devices.
    Returns a DataFrame, one row per hardware, with what is measured and what is assumed."""
    import pandas as pd
    setup = scaled_seconds(demo["setup_s"], demo["users"], users, 1.0)
    per_day = scaled_seconds(demo["sessions_s"], demo["sessions"], sessions, session_exponent)
    same = demo["sessions"] == sessions and demo["users"] == users
    larger = demo["sessions"] >= sessions and demo["users"] >= users
    rows = [{"hardware": "this 2-core CPU", "devices": 1, "speedup_per_device": 1.0,
             "basis": "measured" if same else "measured larger day, scaled by b" if larger else "extrapolated by b",
             "setup_s": setup, "day_s": setup + per_day, "study_h": (setup + days * per_day) / 3600}]
    for hosts, gpus in hosts_gpus:
        for r in speedups:
            g = hosts * gpus
            day = setup / r + per_day / (r * g)
            rows.append({"hardware": f"{hosts} host(s) x {gpus} GPU(s)", "devices": g, "speedup_per_device": r,
                         "basis": "assumed speed-up r", "setup_s": setup / r, "day_s": day,
                         "study_h": (setup / r + days * per_day / (r * g)) / 3600})
    return pd.DataFrame(rows)


def sessions_within(demo: dict, seconds: float, session_exponent: float) -> float:
    """Sessions of one day that fit in `seconds` here: the demonstrated day's sessions_s carried by
    work^b after its setup_s, i.e. N (seconds - setup_s)^(1/b) / sessions_s^(1/b)."""
    left = seconds - demo["setup_s"]
    if left <= 0 or session_exponent <= 0:
        return 0.0
    return demo["sessions"] * (left / demo["sessions_s"]) ** (1.0 / session_exponent)


def arrays_digest(arrays) -> str:
    """SHA-256 of the bytes, dtypes and shapes of a sequence of arrays (first 16 hex digits)."""
    digest = hashlib.sha256()
    for array in arrays:
        array = np.ascontiguousarray(np.asarray(array))
        digest.update(f"{array.dtype}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# Work of one point (run in a child process)
# --------------------------------------------------------------------------------------------

def _feed_setup(num_users: int = 1000, num_items: int = 100):
    """The ``simulate`` stage's scenario, deterministic logger and its exact exposure table."""
    import jax

    from simrec import feed
    like, watch, scores = random_feed_tables(num_users, num_items)
    scenario = feed.Scenario(feed.Logarithmic(), (feed.from_table(like), feed.from_table(watch)),
                             np.full(num_users, 1.0 / num_users, np.float32), ("like", "watch"))
    policy = feed.Policy(feed.all_items(num_items), feed.Sort(feed.from_table(scores)), FEED_LENGTH)
    table = feed.exposure(None, policy, scenario.view, np.arange(num_users)).mean
    return scenario, policy, jax.block_until_ready(table)


def _simulate(key, size: int):
    import jax

    from simrec import feed
    scenario, policy, table = _feed_setup()
    return (lambda: jax.block_until_ready(feed.simulate(key, scenario, policy, size, logging_exposure=table)),
            size, lambda log: {"digest": arrays_digest([log.users, log.items, log.viewed, log.rewards,
                                                       log.logging_exposure])})


def _sweep(key, size: int):
    import jax
    import jax.numpy as jnp

    from simrec import ope
    k_depth, k_reward, k_log, k_target = jax.random.split(key, 4)
    depth = jax.random.randint(k_depth, (size, 1), 1, FEED_LENGTH + 1)
    viewed = jnp.arange(FEED_LENGTH)[None, :] < depth
    rewards = (jax.random.uniform(k_reward, (size, FEED_LENGTH)) < 0.2) & viewed
    logging = jnp.where(viewed, jax.random.uniform(k_log, (size, FEED_LENGTH), minval=0.01), 0.0)
    target = jnp.where(viewed, jax.random.uniform(k_target, (size, FEED_LENGTH)), 0.0)
    inputs = jax.block_until_ready((rewards, logging, target, viewed))
    m = np.array(M_VALUES)
    return (lambda: ope.dcg_sweep(*inputs, m), size,
            lambda estimate: {"estimate_m_inf": float(estimate.value[-1])})


def _metrics(key, size: int):
    import dataclasses

    import jax

    from simrec import metrics, procedural
    from simrec.world import PRESETS
    world = procedural.make_procedural(key, dataclasses.replace(PRESETS["lastfm"], n_users=size,
                                                                n_items=METRIC_ITEMS))
    relevant = procedural.prior_relevant(jax.random.fold_in(key, 1), world)
    score = procedural.score_function(world)
    return (lambda: metrics.evaluate(score, relevant), size * METRIC_ITEMS,
            lambda values: {"relevant": int(relevant.nnz), "mean_ndcg": float(metrics.mean(values["ndcg"]))})


def _opt_adg(key, size: int):
    import dataclasses

    import jax

    from simrec import missing, models, procedural
    from simrec.world import PRESETS
    world = procedural.make_procedural(key, dataclasses.replace(PRESETS["movielens"], n_users=size,
                                                                n_items=OPT_ADG_ITEMS))
    prior = procedural.prior_relevant(jax.random.fold_in(key, 1), world)
    observed = missing.observe_srs(jax.random.fold_in(key, 2), prior, missing.DEFAULT_OBSERVATION_RATE)
    spec = models.MFSpec(models.OptADG(dim=32), l2=0.05, learning_rate=0.1)
    train_key = jax.random.fold_in(key, 3)
    return (lambda: jax.block_until_ready(models.fit(train_key, spec, observed, pairs=observed.nnz)),
            int(observed.nnz), lambda model: {})


#: stage -> setup(key, size) -> (the timed call, its work, facts(the call's output) -> dict)
STAGE_SETUP = {"simulate": _simulate, "sweep": _sweep, "metrics": _metrics, "opt_adg": _opt_adg}


def _status_mb(field: str) -> float:
    """A memory line of /proc/self/status (VmRSS: resident now; VmHWM: its peak) in MB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"/proc/self/status has no {field} (bench scale measures memory on Linux only)")


def _reset_peak_rss() -> None:
    """Reset VmHWM to the current resident set (Linux >= 4.0: write 5 to /proc/self/clear_refs)."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def _device_memory() -> int | None:
    import jax
    stats = jax.devices()[0].memory_stats()
    return None if stats is None else int(stats.get("peak_bytes_in_use", stats.get("bytes_in_use", 0)))


def child(task: dict) -> dict:
    """One measurement in this (fresh) process: a stage point, or a paper day.

    Memory in MB: baseline_rss_mb (resident after importing JAX and simrec), inputs_mb (resident
    growth while building the stage's inputs), peak_rss_mb (peak resident set from the baseline
    on), work_mb (peak above the inputs while the timed calls run, warm-up and compilation included:
    the peak is reset after the inputs are built)."""
    import jax

    import simrec.feed  # noqa: F401  (imports count towards the baseline, not the work)
    import simrec.metrics  # noqa: F401
    import simrec.models  # noqa: F401
    import simrec.ope  # noqa: F401
    import simrec.procedural  # noqa: F401
    jax.devices()
    baseline = _status_mb("VmRSS")
    _reset_peak_rss()
    key = jax.random.key(task["seed"])
    if task["kind"] == "paper":
        out, inputs_peak, inputs = paper_day(key, task["users"], task["items"], task["size"]), baseline, baseline
    else:
        call, work, facts = STAGE_SETUP[task["kind"]](key, task["size"])
        inputs_peak, inputs = _status_mb("VmHWM"), _status_mb("VmRSS")
        _reset_peak_rss()
        seconds, compile_s, result = timed(call, task["repeats"])
        out = {"work": work, "seconds": seconds, "compile_s": compile_s, **facts(result)}
    peak = _status_mb("VmHWM")
    return {**out, "baseline_rss_mb": baseline, "inputs_mb": inputs - baseline,
            "peak_rss_mb": max(peak, inputs_peak), "work_mb": peak - inputs,
            "device_memory_bytes": _device_memory(), "devices": len(jax.devices())}


def run_child(task: dict, devices: int | None = None, timeout: float = 1800) -> dict:
    """Run `child(task)` in a fresh interpreter (with `devices` emulated CPU devices if given)."""
    env = dict(os.environ)
    if devices is not None:
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}".strip()
    done = subprocess.run([sys.executable, "-m", "simrec_studies.bench_scale", "--child", json.dumps(task)],
                          capture_output=True, text=True, env=env, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"bench scale child {task} failed:\n{done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------
# The paper scenario: candidate slots over a procedural world
# --------------------------------------------------------------------------------------------

def _slot_items(params, contexts, slots):
    """Item id of slot j of user x: (o_x + j s) mod I.  contexts i32[N], slots i32[N, K] -> i32[N, K]."""
    import jax
    import jax.numpy as jnp
    key, stride, n_items = params
    offsets = jax.vmap(lambda x: jax.random.randint(jax.random.fold_in(key, x), (), 0, n_items))(contexts)
    return ((offsets[:, None] + slots.astype(jnp.int32) * stride) % n_items).astype(jnp.int32)


def _slot_quality(params, contexts, slots):
    from simrec import feed
    slotting, quality = params
    return feed.item_values(quality, contexts, _slot_items(slotting, contexts, slots))


def _retrieval_order(params, contexts, slots):
    return -slots.astype(np.float32)


def paper_feed(key, users: int, items: int, slots: int = FEED_LENGTH):
    """(scenario, logger, target) over candidate slots of a procedural world (module docstring, 3).

    The world: `WorldConfig` defaults (d = 16) with offset -2 (clicks are common enough to estimate)."""
    import jax
    import jax.numpy as jnp

    from simrec import feed, procedural
    from simrec.world import WorldConfig
    if math.gcd(SLOT_STRIDE, items) != 1 or slots > items:
        raise ValueError(f"items = {items} must be coprime with {SLOT_STRIDE} and at least slots = {slots}")
    world = procedural.make_procedural(key, WorldConfig(n_users=users, n_items=items, offset=-2.0))
    slotting = (jax.random.fold_in(key, 7), jnp.int32(SLOT_STRIDE), jnp.int32(items))
    quality = feed.ItemFn(_slot_quality, (slotting, feed.world_quality(world)), slots)
    activity = jax.nn.softmax(procedural.user_log_activity(world, np.arange(users, dtype=np.int32)))
    scenario = feed.Scenario(feed.Logarithmic(), (quality,), activity, ("click",))
    candidates = feed.all_items(slots)
    logger = feed.Policy(candidates, feed.Sort(feed.ItemFn(_retrieval_order, (), slots)), FEED_LENGTH)
    target = feed.Policy(candidates, feed.Sort(quality), FEED_LENGTH)
    return scenario, logger, target


def pooled_estimate(sizes, values, errors) -> tuple[np.ndarray, np.ndarray]:
    """Pool independent chunk estimates: mean weighted by size, se = sqrt(sum n_c^2 se_c^2) / N.

    sizes: int[C]; values, errors: f[C, M].  Returns (f64[M], f64[M])."""
    n = np.asarray(sizes, np.float64)[:, None]
    values, errors = np.asarray(values, np.float64), np.asarray(errors, np.float64)
    if values.shape != errors.shape or values.shape[0] != n.shape[0] or np.any(n <= 0):
        raise ValueError("pooled_estimate needs positive sizes [C] and values, errors [C, M]")
    total = n.sum()
    return (n * values).sum(0) / total, np.sqrt((n ** 2 * errors ** 2).sum(0)) / total


def paper_day(key, users: int, items: int, sessions: int) -> dict:
    """One logged day of the paper scenario: tables, sessions, 14-m DCG estimates, online truth."""
    import jax

    from simrec import feed, ope
    start = time.perf_counter()
    scenario, logger, target = paper_feed(key, users, items)
    contexts = np.arange(users, dtype=np.int32)
    logging_table = jax.block_until_ready(feed.exposure(None, logger, scenario.view, contexts).mean)
    target_table = jax.block_until_ready(feed.exposure(None, target, scenario.view, contexts).mean)
    truth_target = float(feed.online_value(None, scenario, target).mean[0])
    truth_logger = float(feed.online_value(None, scenario, logger).mean[0])
    setup_s = time.perf_counter() - start
    start = time.perf_counter()
    sizes, values, errors = [], [], []
    m = np.array(M_VALUES)
    for chunk in feed.session_chunks(jax.random.fold_in(key, 1), scenario, logger, sessions, logging_table):
        target_exposure = feed.exposure_of(target_table, chunk["users"], chunk["items"])
        estimate = ope.dcg_sweep(chunk["rewards"][0], chunk["logging_exposure"], target_exposure,
                                 chunk["viewed"], m)
        sizes.append(chunk["users"].shape[0])
        values.append(estimate.value)
        errors.append(estimate.standard_error)
    value, error = pooled_estimate(sizes, values, errors)
    sessions_s = time.perf_counter() - start
    return {"users": users, "items": items, "sessions": sessions, "work": sessions, "chunks": len(sizes),
            "setup_s": setup_s, "sessions_s": sessions_s, "seconds": setup_s + sessions_s,
            "estimate_m_inf": float(value[-1]), "se_m_inf": float(error[-1]),
            "estimate_m_1": float(value[0]), "online_target": truth_target, "online_logger": truth_logger}


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

def loglog_figure(points, fits):
    """Time and memory against work per stage on log-log axes, with the fitted lines."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    stages = list(dict.fromkeys(points.stage))
    fig, axes = plt.subplots(2, len(stages), figsize=(3.4 * len(stages), 6.2), squeeze=False)
    for col, stage in enumerate(stages):
        group, fit = points[points.stage == stage], fits.set_index("stage").loc[stage]
        for row, (column, exponent, label) in enumerate((("seconds", "time_exponent", "seconds (median)"),
                                                         ("work_mb", "work_memory_exponent",
                                                          "peak RSS above inputs (MB)"))):
            ax = axes[row, col]
            y = group[column].clip(lower=1.0) if column == "work_mb" else group[column]
            ax.loglog(group.work, y, "o")
            line = loglog_fit(group.work, y)
            x = np.geomspace(group.work.min(), group.work.max(), 20)
            ax.loglog(x, 10 ** line.intercept * x ** line.exponent, "-", alpha=0.6)
            ax.set_title(f"{stage}: b = {fit[exponent]:.2f}", fontsize=9)
            ax.set_xlabel(STAGES[stage].work, fontsize=8)
            ax.set_ylabel(label, fontsize=8)
    fig.suptitle("simrec bench scale: time and memory against work (2-core CPU)", fontsize=10)
    fig.tight_layout()
    return fig


def _readme(summary: str, files: list[str]) -> str:
    return "\n".join(["# scale", "",
                      "Time and peak memory against work for session simulation, the 14-value m sweep, "
                      "blocked metrics and OPT-ADG (log-log exponents), sessions/s on 1-8 emulated devices, "
                      "and a paper-sized day (10^6 users, 10^5 items, 10^7 sessions) demonstrated and "
                      "estimated; `simrec bench scale`", "", summary, "",
                      "Files:", "", *[f"- [{f}]({f})" for f in files]]) + "\n"


def summary_text(fits, device_table, demo: dict, estimate, exponent: float, quick: bool) -> str:
    """The README's findings, in words, from the tables."""
    lines = ["Measured on a 2-core CPU: times are medians of warm repeats, each size in a fresh process, and "
             "still noisy, so read exponents to about ±0.1. A whole-range exponent below 1 means fixed per-call "
             "costs dominate the small sizes; the exponent between the two largest sizes shows the linear regime." + (" (Quick smoke run.)" if quick else "")]
    for row in fits.itertuples():
        lines.append(f"- `{row.stage}`: time ∝ work^{row.time_exponent:.2f} (± {row.time_exponent_se:.2f}; "
                     f"work^{row.time_exponent_top:.2f} between the two largest sizes), "
                     f"peak memory above the import baseline ∝ work^{row.memory_exponent:.2f}, the work's "
                     f"own memory (above its inputs) ∝ work^{row.work_memory_exponent:.2f}, over "
                     f"{row.work_min:,}–{row.work_max:,} {STAGES[row.stage].work}; at the largest "
                     f"{row.seconds_at_max:.3g} s and {max(row.work_mb_at_max, 0.0):,.0f} MB above the inputs"
                     + (f" (the dense score matrix alone would be {row.work_max * 4 / 2**20:,.0f} MB)."
                        if row.stage == "metrics" else "."))
    digests = device_table.digest.nunique()
    lines.append(f"- Devices: {', '.join(f'{r.devices}: {r.sessions_per_s:,.0f}/s' for r in device_table.itertuples())} "
                 f"sessions/s; the logs are {'identical' if digests == 1 else 'NOT identical'} across device counts. "
                 "The sessions are sharded over the emulated devices (`simrec.sharding`), which share the 2 cores: "
                 "a correctness-and-overhead check, not a speed-up.")
    cpu = estimate.iloc[0]
    lines.append(f"- Paper scenario demonstrated: {demo['users']:,} users x {demo['items']:,} items, "
                 f"{demo['sessions']:,} sessions in {demo['seconds']:.0f} s ({demo['setup_s']:.0f} s tables and "
                 f"online truth, {demo['sessions_s']:.0f} s sessions + 14-m DCG); m = ∞ estimate "
                 f"{demo['estimate_m_inf']:.4f} ± {demo['se_m_inf']:.4f} against the target's exact online value "
                 f"{demo['online_target']:.4f} (logger {demo['online_logger']:.4f}).")
    lines.append(f"- Ten minutes on this CPU would hold a day of about {sessions_within(demo, 600.0, exponent):,.0f} "
                 f"sessions for {demo['users']:,} users (the demonstrated day carried by work^{exponent:.2f}).")
    lines.append(f"- Estimated paper day ({PAPER_SESSIONS:,} sessions, {PAPER_USERS:,} users; {cpu.basis}): "
                 f"{cpu.day_s / 60:.1f} min on this CPU; "
                 + "; ".join(f"{r.hardware}, r = {r.speedup_per_device:g}: {r.day_s:.0f} s/day"
                             for r in estimate.iloc[1:].itertuples())
                 + f" (r = assumed throughput of one GPU relative to this CPU, not measured; "
                   f"{PAPER_DAYS}-day study in column study_h).")
    lines.append("- Limitation: the paper scenario restricts each user to k = 10 candidate slots (a retrieval "
                 "stage) because `feed.simulate` records logging exposures from a contexts x items table; "
                 "exposures of items outside a user's candidate set are not modelled.")
    return "\n".join(lines)


def write_results(out: Path, points, fits, device_table, demo_table, estimate, figure, manifest: dict,
                  summary: str) -> None:
    """Write every table, the figure, README.md and manifest.json into `out` as one finished set."""
    with OutputFolder(out, "simrec bench scale") as folder:
        files = []
        for name, frame in (("table_points", points), ("table_exponents", fits), ("table_devices", device_table),
                            ("table_paper_demo", demo_table), ("table_paper_estimate", estimate)):
            files += write_table(folder.staging, name, frame)
        files.append(write_figure(folder.staging, "fig_loglog", figure))
        files = sorted(files)
        atomic_write_text(folder.staging / "README.md", _readme(summary, files + ["manifest.json"]))
        manifest["files"] = files + ["README.md"]
        atomic_write_text(folder.staging / "manifest.json", json.dumps(manifest, indent=2, allow_nan=True) + "\n")
        folder.commit()


@usage_errors
def main(argv: list[str] | None = None) -> int:
    from simrec.runner import MAX_SEED                           # the seeds every study accepts
    parser = Parser(prog="simrec bench scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="results/scale")
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny sizes, one repeat")
    parser.add_argument("--repeats", type=positive_int, default=3, help="warm timed calls per point (median)")
    parser.add_argument("--paper-sessions", type=integer(2), default=DEMO_SESSIONS,
                        help="sessions of the demonstrated day (>= 2)")
    parser.add_argument("--paper-users", type=positive_int, default=PAPER_USERS)
    parser.add_argument("--paper-items", type=integer(FEED_LENGTH), default=PAPER_ITEMS,
                        help=f">= {FEED_LENGTH} and not a multiple of {SLOT_STRIDE}")
    parser.add_argument("--device-sessions", type=integer(2), default=1_000_000)
    parser.add_argument("--seed", type=integer(0, MAX_SEED), default=0)
    parser.add_argument("--stages", nargs="+", default=list(STAGES), choices=list(STAGES))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    if math.gcd(SLOT_STRIDE, args.paper_items) != 1:
        parser.error(f"--paper-items {args.paper_items} is a multiple of the slot stride {SLOT_STRIDE} (a prime); "
                     "pick a number of items coprime with it")
    import pandas as pd
    started, wall = datetime.datetime.now(datetime.timezone.utc), time.perf_counter()
    repeats = 1 if args.quick else args.repeats
    import jax

    def measure(task, devices=None, **options):
        """In a fresh process; with --quick in this one (memory then not isolated) when it has the
        devices asked for."""
        if args.quick and devices in (None, jax.device_count()):
            return child(task)
        return run_child(task, devices, **options)
    device_counts = DEVICE_COUNTS[:2] if args.quick else DEVICE_COUNTS
    rows = []
    for stage in args.stages:
        for size in (STAGES[stage].quick_sizes if args.quick else STAGES[stage].sizes):
            point = measure({"kind": stage, "size": size, "repeats": repeats, "seed": args.seed})
            rows.append({"stage": stage, **{k: point[k] for k in ("work", "seconds", "compile_s", "baseline_rss_mb",
                                                                 "inputs_mb", "work_mb", "peak_rss_mb",
                                                                 "device_memory_bytes")}})
            print(f"  {stage:<9} work {point['work']:>12,}: {point['seconds']:9.4f} s (compile "
                  f"{point['compile_s']:.2f} s), peak RSS {point['peak_rss_mb']:,.0f} MB (inputs "
                  f"+{point['inputs_mb']:,.0f}, work +{point['work_mb']:,.0f})", flush=True)
    points = pd.DataFrame(rows)
    fits = exponents_table(points)

    device_sessions = 4_000 if args.quick else args.device_sessions
    devices = []
    for n in device_counts:
        point = measure({"kind": "simulate", "size": device_sessions, "repeats": repeats, "seed": args.seed}, n)
        devices.append({"devices": point["devices"], "sessions": device_sessions, "seconds": point["seconds"],
                        "sessions_per_s": device_sessions / point["seconds"], "compile_s": point["compile_s"],
                        "digest": point["digest"]})
        print(f"  {n} device(s): {device_sessions / point['seconds']:,.0f} sessions/s, log {point['digest']}",
              flush=True)
    device_table = pd.DataFrame(devices)

    users, items, sessions = ((500, 500, 2_000) if args.quick else
                              (args.paper_users, args.paper_items, args.paper_sessions))
    demo = measure({"kind": "paper", "size": sessions, "users": users, "items": items, "seed": args.seed},
                     timeout=3600)
    print(f"  paper day: {users:,} users x {items:,} items, {sessions:,} sessions in {demo['seconds']:.1f} s",
          flush=True)
    demo_table = pd.DataFrame([{k: demo[k] for k in ("users", "items", "sessions", "chunks", "setup_s",
                                                     "sessions_s", "seconds", "peak_rss_mb", "work_mb",
                                                     "estimate_m_inf", "se_m_inf", "estimate_m_1",
                                                     "online_target", "online_logger")}])
    exponents = fits.set_index("stage").time_exponent
    # fitted exponents below 1 come from fixed per-call costs at small sizes; carrying a day to
    # other sizes with b < 1 would flatter large ones, so the estimate uses b = max(fits, 1)
    session_exponent = float(max(exponents.get("simulate", 1.0), exponents.get("sweep", 1.0), 1.0))
    estimate = paper_estimate(demo, session_exponent)
    summary = summary_text(fits, device_table, demo, estimate, session_exponent, args.quick)
    from simrec.runner import git_commit, module_version, package_versions   # the fields every study records
    manifest = {"study": "scale", "benchmark": "scale", "code_version": module_version(__name__),
                "preset": "quick" if args.quick else "default", "seed": args.seed,
                "config": {"stages": {s: list(STAGES[s].quick_sizes if args.quick else STAGES[s].sizes)
                                      for s in args.stages}, "repeats": repeats, "feed_length": FEED_LENGTH,
                           "m_values": list(M_VALUES), "device_counts": list(device_counts),
                           "in_process": args.quick,
                           "device_sessions": device_sessions, "paper_demo": [users, items, sessions],
                           "paper_target": [PAPER_USERS, PAPER_ITEMS, PAPER_SESSIONS], "paper_days": PAPER_DAYS,
                           "assumed_gpu_speedups": list(GPU_SPEEDUPS), "session_exponent": session_exponent},
                "wall_time_s": round(time.perf_counter() - wall, 3), "started_utc": started.isoformat(timespec="seconds"),
                "git_commit": git_commit(), "versions": package_versions(),
                "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                            "devices": [f"{d.platform}:{d.device_kind}" for d in jax.devices()],
                            "device_memory_stats": "None on CPU: peak memory is the child's RSS"
                            if jax.devices()[0].memory_stats() is None else "see device_memory_bytes"},
                "command": " ".join(["simrec", "bench", "scale", *(argv if argv is not None else sys.argv[1:])])}
    write_results(Path(args.out), points, fits, device_table, demo_table, estimate,
                  loglog_figure(points, fits), manifest, summary)
    if Path(args.out).absolute().parent == RESULTS.absolute():     # the committed run: keep the index current
        write_results_index(RESULTS)
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
