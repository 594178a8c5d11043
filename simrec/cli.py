"""Command line: ``simrec list | show STUDY | run STUDY | run all | sweep FIELD | bench NAME``.

Studies and benchmarks are found through the entry-point groups ``simrec.studies`` (each entry a
`simrec.runner.Study`) and ``simrec.benchmarks`` (each a ``main(argv) -> int``), so any installed
package can register its own; the library never imports them otherwise. Errors a user can fix
(unknown study, preset, config key, a value of the wrong type, an unusable output folder) print
one line naming the problem and the valid choices and exit with status 2, without a traceback.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import math
import os
import sys
import warnings
from importlib import metadata
from pathlib import Path

from simrec.config import ConfigError, config_fields, config_help, with_overrides
from simrec.executor import ExecutorError, open_executor, parse_executor
from simrec.output import OutputError, write_results_index
from simrec.runner import MAX_SEED, RecordError, RunInterrupted, SetupMemo, default_cache_dir, run

EXIT_USAGE = 2
STUDY_GROUP, BENCH_GROUP = "simrec.studies", "simrec.benchmarks"
RESULTS, RUNS = Path("results"), Path("runs")
DATA_ENV = "SIMREC_DATA"


class UsageError(Exception):
    """A mistake in the command line; printed as one line, exit status 2."""


def entry_points(group: str) -> dict[str, metadata.EntryPoint]:
    """``{name: entry point}`` of an entry-point group, in registration order."""
    return {ep.name: ep for ep in metadata.entry_points(group=group)}


def studies() -> dict[str, metadata.EntryPoint]:
    return entry_points(STUDY_GROUP)


def load_study(name: str):
    found = studies()
    if name not in found:
        raise UsageError(f"unknown study {name!r}; choose one of: {', '.join(found)}, all")
    return found[name].load()


def _parse_sets(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--set expects key=value, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def _config(study, preset: str, sets: dict[str, str]):
    try:
        return with_overrides(study.preset(preset), sets)
    except ConfigError as err:
        raise ConfigError(f"study {study.name!r}: {err}") from None


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seed expects an integer in [0, {MAX_SEED}], got {text!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"--seed expects an integer in [0, {MAX_SEED}], got {text}")
    return value


def _workers(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--workers expects a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--workers expects a positive integer, got {text}")
    return value


def default_out(study: str, preset: str, seed: int, sets: dict[str, str]) -> Path:
    """Where a run writes without ``--out``: ``results/STUDY`` for the committed default (preset
    ``default``, seed 0, no ``--set``), else ``runs/STUDY/PRESET[-seedS][-HASH of the --set]``,
    so only the default run ever touches ``results/``."""
    if preset == "default" and seed == 0 and not sets:
        return RESULTS / study
    name = preset + (f"-seed{seed}" if seed else "")
    if sets:
        name += "-" + hashlib.sha256(json.dumps(sets, sort_keys=True).encode()).hexdigest()[:8]
    return RUNS / study / name


def _data_notes() -> list[str]:
    root = os.environ.get(DATA_ENV)
    return [f"real data from `{root}` ({DATA_ENV} / --data-dir)"] if root else []


def _set_data_dir(args) -> None:
    if getattr(args, "data_dir", None):
        path = Path(args.data_dir)
        if not path.is_dir():
            raise UsageError(f"--data-dir {path} is not a folder; point it at a folder holding e.g. "
                             f"ml-latest-small/ratings.csv")
        os.environ[DATA_ENV] = str(path.absolute())


def cmd_list(args) -> int:
    found = studies()
    width = max(map(len, found), default=0)
    for name in found:
        try:
            description = load_study(name).description
        except Exception as err:               # noqa: BLE001 - one broken plugin must not hide the rest
            description = f"(cannot be loaded: {type(err).__name__}: {err})"
        print(f"{name:<{width}}  {description}")
    benches = entry_points(BENCH_GROUP)
    if benches:
        print("\nbenchmarks (simrec bench NAME --help): " + ", ".join(benches))
    print("\nsimrec show STUDY lists a study's presets and config keys.")
    return 0


def _minutes(seconds: float | None) -> str:
    if seconds is None:
        return "not measured"
    return f"~{seconds:.0f} s" if seconds < 120 else f"~{seconds / 60:.0f} min"


def describe(study) -> str:
    """Presets with their expected wall time, and every config key with type, default, meaning."""
    lines = [f"{study.name}: {study.description}", "", "presets (expected wall time on a 2-core CPU):"]
    for preset in study.presets:
        lines.append(f"  {preset:<8} {_minutes(study.expected_seconds.get(preset))}")
    lines += ["", "config keys (--set KEY=VALUE; default preset's values):"]
    rows = config_help(study.preset("default"))
    width = max(len(k) for k, *_ in rows)
    for key, tp, default, meaning in rows:
        lines.append(f"  {key:<{width}}  {tp} = {default!r}" + (f"\n  {'':<{width}}    {meaning}" if meaning else ""))
    lines += ["", f"records: {', '.join(f'{c} ({t.__name__})' for c, t in study.columns.items())}"]
    return "\n".join(lines)


def cmd_show(args) -> int:
    print(describe(load_study(args.study)))
    return 0


def _distributed(args) -> bool:
    """Start a multi-host run from --coordinator/--num-processes/--process-id or the cluster's
    environment (`simrec.sharding.initialize`) before any JAX work; whether this process writes.
    A multi-host run computes its cells in place (--executor local)."""
    from simrec import sharding
    try:
        started = sharding.initialize(args.coordinator, args.num_processes, args.process_id)
    except sharding.DistributedError as err:
        raise UsageError(str(err)) from None
    if started and args.executor != "local":
        raise UsageError("a multi-host run (--coordinator or a cluster environment) computes its cells "
                         "on its own devices; drop --executor or use --executor local")
    return sharding.is_writer()


def cmd_run(args) -> int:
    writer = _distributed(args)
    _set_data_dir(args)
    names = list(studies()) if args.study == "all" else [args.study]
    sets = _parse_sets(args.set)
    plans = []
    for name in names:                      # validate everything before computing anything
        study = load_study(name)
        plans.append((study, _config(study, args.preset, sets)))
    with _executor(args) as executor:
        wrote_results = _run_plans(args, plans, sets, executor, writer)
    if wrote_results and writer:            # the committed default: keep results/README.md current
        write_results_index(RESULTS)
    return 0


@contextlib.contextmanager
def _executor(args):
    """The executor of ``--executor``/``--workers`` (validated before any cell), closed at the end."""
    executor = open_executor(parse_executor(args.executor, args.workers))
    try:
        yield executor
    finally:
        executor.close()


def _run_plans(args, plans, sets, executor, writer: bool) -> bool:
    """Run each (study, config); whether any run wrote into results/ (`writer`: this process
    writes, see `_distributed`)."""
    memo = SetupMemo()
    wrote_results = False
    for study, config in plans:
        if args.out:
            out = Path(args.out) / study.name if len(plans) > 1 else Path(args.out)
        else:
            out = default_out(study.name, args.preset, args.seed, sets)
        # a run written into results/ (the default, or e.g. --out results/STUDY_paper) is indexed
        wrote_results |= out.resolve().parent == RESULTS.resolve()
        summary = run(study, config, seed=args.seed, out=out, preset=args.preset,
                      progress=not args.quiet and writer, memo=memo,
                      notes=_data_notes(), executor=executor)
        if writer:
            print(f"{study.name}: {summary.cells_computed} cells computed, {summary.cells_cached} "
                  f"cached, {summary.wall_time_s:.1f}s -> {summary.out}")
    return wrote_results


def _expand_values(values: list[str], limit: float | None = None) -> list[str]:
    """Expand one ``...`` in a value list: ``1,2,4,...,4096,inf`` continues the arithmetic or
    geometric progression of the (at least three) numbers before it up to the number after it,
    which it must reach exactly; values after that are kept as given. An infinite end
    (``1,2,4,...,inf``) continues up to `limit` (the largest finite value of the swept field's
    current tuple, e.g. 4096 for the clipping grid m) and keeps the inf."""
    if "..." not in values:
        return values
    i = values.index("...")
    if values.count("...") > 1 or i < 3 or i + 1 >= len(values):
        raise UsageError("--values: '...' needs at least three numbers before it and an end after it, "
                         "e.g. 1,2,4,...,4096,inf")
    try:
        head, end = [float(v) for v in values[i - 3:i]], float(values[i + 1])
    except ValueError:
        raise UsageError(f"--values: '...' continues numbers only, got {values[i - 3:i + 2]}") from None
    a, b, c = head
    if not all(map(math.isfinite, head)):
        raise UsageError(f"--values: '...' continues finite numbers only, got {values[i - 3:i]}")
    if math.isclose(b - a, c - b) and b != a:
        step = lambda x: x + (b - a)                     # noqa: E731
    elif a != 0 and b != 0 and math.isclose(b / a, c / b) and b / a > 0 and b != a:
        step = lambda x: x * (b / a)                     # noqa: E731
    else:
        raise UsageError(f"--values: {values[i - 3:i]} is neither an arithmetic nor a geometric progression")
    exact = math.isfinite(end)
    if not exact and (limit is None or not math.isfinite(limit) or (limit - c) * (c - a) <= 0):
        raise UsageError("--values: '...' needs a finite end here, e.g. 1,2,4,...,4096,inf")
    stop = end if exact else limit
    out, x = [], step(c)
    while (stop - x) * (c - a) > 0 and not math.isclose(x, stop) and len(out) < 10_000:
        out.append(x)
        x = step(x)
    if not math.isclose(x, stop):
        if exact:
            raise UsageError(f"--values: the progression {values[i - 3:i]} does not reach {values[i + 1]}")
    elif not exact:
        out.append(x)                                    # the limit itself, then the given inf
    return values[:i] + [format(v, ".12g") for v in out] + values[i + 1:]


def cmd_sweep(args) -> int:
    """Run one study once per value of a config field; outputs go to OUT/FIELD=VALUE/ (written by
    process 0 alone in a multi-host run).

    Cells are cached in results/.simrec-cache (OUT/.simrec-cache with --out), so a sweep reuses
    the cells of an earlier `simrec run STUDY`. When the field is a tuple that the study declares a report
    field (its points are cells, e.g. the clipping grid m of `sensitivity`), the study first runs
    once over all values together (OUT/FIELD=all/), so that it can compute every setting in one
    vectorised pass; the per-value runs then read their cells from the cache.
    """
    writer = _distributed(args)
    _set_data_dir(args)
    study = load_study(args.study)
    sets = _parse_sets(args.set)
    base = _config(study, args.preset, sets)
    fields = config_fields(base)
    matches = [k for k in fields if k == args.field or k.endswith("." + args.field)]
    if len(matches) != 1:
        raise UsageError(f"sweep field {args.field!r} {'is ambiguous' if matches else 'is unknown'}"
                         f"; valid fields: {', '.join(sorted(fields))}")
    key = matches[0]
    current = getattr(functools.reduce(getattr, key.split(".")[:-1], base), key.split(".")[-1])
    finite = [float(v) for v in current if isinstance(v, (int, float)) and math.isfinite(v)] \
        if isinstance(current, tuple) else []
    values = _expand_values([v.strip() for v in args.values.split(",") if v.strip()],
                            max(finite) if finite else None)
    if not values:
        raise UsageError("--values needs at least one value, e.g. --values 1,2,4,inf")
    configs = [(v, with_overrides(base, {**sets, key: v})) for v in values]
    with _executor(args) as executor:
        return _sweep(args, study, sets, base, key, values, configs, executor, writer)


def _sweep(args, study, sets, base, key, values, configs, executor, writer: bool) -> int:
    import typing

    import pandas as pd

    from simrec.runner import atomic_write_text, write_table
    fields = config_fields(base)
    root = Path(args.out) if args.out else RUNS / study.name / f"sweep-{key}"
    # without --out, reuse the cells of the committed `simrec run STUDY` (results/.simrec-cache)
    cache = default_cache_dir(root / "x") if args.out else default_cache_dir(RESULTS / study.name)
    memo = SetupMemo()
    if typing.get_origin(fields[key]) is tuple and key in study.report_fields and len(values) > 1:
        together = with_overrides(base, {**sets, key: ",".join(values)})
        summary = run(study, together, seed=args.seed, out=root / f"{key}=all", preset=args.preset,
                      cache_dir=cache, progress=not args.quiet and writer, memo=memo,
                      notes=_data_notes(), executor=executor)
        if writer:
            print(f"{key}=all: {summary.cells_computed} computed, {summary.cells_cached} cached")
    combined: dict[str, list] = {}
    for value, config in configs:
        out = root / f"{key}={value}"
        summary = run(study, config, seed=args.seed, out=out, preset=args.preset,
                      cache_dir=cache, progress=not args.quiet and writer, memo=memo,
                      notes=_data_notes(), executor=executor)
        if not writer:
            continue
        print(f"{key}={value}: {summary.cells_computed} computed, {summary.cells_cached} cached")
        for csv in sorted(out.glob("table*.csv")):
            frame = pd.read_csv(csv)
            frame.insert(0, key if key not in frame.columns else f"sweep {key}", value)
            combined.setdefault(csv.stem, []).append(frame)
    if not writer:
        return 0
    for name, frames in combined.items():
        write_table(root, name, pd.concat(frames, ignore_index=True))
    atomic_write_text(root / "README.md", f"# sweep of `{key}` over {', '.join(values)} "
                      f"for study `{study.name}`\n\nOne folder per value; `table*` here stack "
                      f"them with a `{key}` column.\n")
    print(f"sweep -> {root}")
    return 0


def cmd_bench(args, rest: list[str]) -> int:
    benches = entry_points(BENCH_GROUP)
    if args.name not in benches:
        raise UsageError(f"unknown benchmark {args.name!r}; choose one of: {', '.join(benches)}")
    return int(benches[args.name].load()(rest) or 0)


class _Parser(argparse.ArgumentParser):
    def error(self, message):                 # one line, exit 2, no usage dump
        raise UsageError(message)


def _version() -> str:
    try:
        return metadata.version("simrec")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="simrec", description="simrec: simulation and off-policy evaluation for "
                     "top-n recommendation, offline metrics against a known truth.",
                     epilog="simrec COMMAND --help shows a command's options; simrec show STUDY a "
                            "study's presets and config keys.")
    parser.add_argument("--version", action="version", version=f"simrec {_version()}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")
    sub.add_parser("list", help="list studies and benchmarks")
    p_show = sub.add_parser("show", help="a study's presets, config keys and expected wall time")
    p_show.add_argument("study")

    def common(p):
        p.add_argument("--preset", default="default", help="smoke | default | paper (default: default)")
        p.add_argument("--seed", type=_seed, default=0, help=f"root seed in [0, {MAX_SEED}] (default 0)")
        p.add_argument("--out", default=None, help="output folder (default: results/STUDY for the "
                       "default preset, seed 0 and no --set; runs/STUDY/... otherwise)")
        p.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="override a config field (dotted for nested fields; see simrec show STUDY)")
        p.add_argument("--data-dir", default=None, help=f"folder of real data sets (default ${DATA_ENV} "
                       "or ../shared/data beside the checkout)")
        p.add_argument("--quiet", action="store_true", help="no progress display")
        p.add_argument("--executor", default="local", metavar="WHERE",
                       help="where cells are computed: local (default, this process), dask (a local "
                       "Dask cluster of --workers processes) or dask://HOST:PORT / tcp://HOST:PORT "
                       "(a running Dask scheduler); needs pip install 'simrec[cluster]'")
        p.add_argument("--workers", type=_workers, default=None, metavar="N",
                       help="worker processes of --executor dask (default: one per core)")
        p.add_argument("--coordinator", default=None, metavar="HOST:PORT",
                       help="multi-host run: the address of process 0 (with --num-processes and "
                       "--process-id; without them, SLURM / Open MPI / JAX_COORDINATOR_ADDRESS "
                       "environments are detected); process 0 alone writes (README 'Scaling out')")
        p.add_argument("--num-processes", type=int, default=None, metavar="N",
                       help="multi-host run: the number of processes")
        p.add_argument("--process-id", type=int, default=None, metavar="I",
                       help="multi-host run: this process's index in [0, N-1]")

    p_run = sub.add_parser("run", help="run a study (or all) and write its tables and figures",
                           add_help=False)
    p_run.add_argument("study")
    p_run.add_argument("-h", "--help", action="store_true", help="this help, and the study's keys")
    common(p_run)
    p_sweep = sub.add_parser("sweep", help="run a study once per value of one config field")
    p_sweep.add_argument("field")
    p_sweep.add_argument("--study", required=True)
    p_sweep.add_argument("--values", required=True, help="comma-separated, e.g. 1,2,4,...,4096,inf")
    common(p_sweep)
    p_bench = sub.add_parser("bench", help="run a benchmark (simrec bench NAME --help for its options)",
                             add_help=False)
    p_bench.add_argument("name", nargs="?")
    return parser


def _format_warning(message, category, filename, lineno, line=None) -> str:
    return f"simrec: warning: {message}\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    warnings.formatwarning = _format_warning
    os.environ.setdefault("MPLBACKEND", "Agg")          # figures are files, never windows
    try:
        args, rest = parser.parse_known_args(argv)
        if args.command is None:
            parser.print_help()
            return 0
        if args.command == "bench":
            if args.name is None:
                benches = entry_points(BENCH_GROUP)
                print("usage: simrec bench NAME [options]   (simrec bench NAME --help)\n\nbenchmarks: "
                      + ", ".join(benches))
                return 0
            return cmd_bench(args, rest)
        if rest:
            raise UsageError(f"unrecognised arguments: {' '.join(rest)}")
        if args.command == "run" and args.help:
            build_parser()._subparsers._group_actions[0].choices["run"].print_help()
            if args.study != "all":
                print("\n" + describe(load_study(args.study)))
            return 0
        return {"list": cmd_list, "show": cmd_show, "run": cmd_run, "sweep": cmd_sweep}[args.command](args)
    except (UsageError, ConfigError, OutputError, RecordError, ExecutorError) as err:
        print(f"simrec: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except RunInterrupted as stop:
        done = (f"{stop.cached} of {stop.total} cells are cached; run the same command again to "
                "resume" if stop.cached else "no cell had finished, so nothing is cached")
        print(f"simrec: interrupted during {stop.study}; {done}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("simrec: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
