"""Command line: ``simrec list | show STUDY | run STUDY | run all | sweep FIELD | results | bench NAME``.

Studies and benchmarks are found through the entry-point groups ``simrec.studies`` (each entry a
`simrec.runner.Study`) and ``simrec.benchmarks`` (each a ``main(argv) -> int``), so any installed
package can register its own; the library never imports them otherwise. Errors a user can fix
(unknown study, preset, config key, a value of the wrong type, an unusable output folder, missing
or malformed data, processes of a multi-host run that disagree) print one line naming the problem
and the fix and exit with status 2, without a traceback.

Runs without ``--out`` never touch the committed results: they write to ``runs/STUDY/PRESET...``
and, when ``results/`` holds a committed folder of the same preset, end by comparing with it;
``--publish`` writes into ``results/`` (``simrec results`` says which committed folders the code
and data still produce). The heavy modules (JAX, the runner) are imported by the commands that
need them, so ``simrec list`` and ``simrec --help`` answer at once.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import hashlib
import importlib.util
import json
import math
import os
import sys
import warnings
from importlib import metadata
from pathlib import Path

from simrec.config import MAX_SEED, ConfigError, config_fields, config_help, with_overrides
from simrec.datafiles import DATA_ENV
from simrec.output import RESULTS, RUNS

EXIT_USAGE = 2
STUDY_GROUP, BENCH_GROUP = "simrec.studies", "simrec.benchmarks"
#: the cell and setup cache of every run without --out (runs and published results share it)
RUNS_CACHE = RUNS / ".simrec-cache"


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


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects a positive number of seconds, got {text!r}") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"expects a positive number of seconds, got {text}")
    return value


def _workers(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--workers expects a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--workers expects a positive integer, got {text}")
    return value


def committed_folder(study: str, preset: str) -> Path:
    """The committed results of a preset: ``results/STUDY`` (default) or ``results/STUDY_PRESET``."""
    return RESULTS / (study if preset == "default" else f"{study}_{preset}")


def default_out(study: str, preset: str, seed: int, sets: dict[str, str], publish: bool = False) -> Path:
    """Where a run writes without ``--out``: with ``publish``, the committed folder
    (`committed_folder`); otherwise ``runs/STUDY/PRESET[-seedS][-HASH of the --set]``, so that
    only an explicit ``--publish`` (or ``--out results/...``) touches ``results/``."""
    if publish:
        return committed_folder(study, preset)
    name = preset + (f"-seed{seed}" if seed else "")
    if sets:
        name += "-" + hashlib.sha256(json.dumps(sets, sort_keys=True).encode()).hexdigest()[:8]
    return RUNS / study / name


def _set_data_dir(args) -> None:
    if getattr(args, "data_dir", None):
        path = Path(args.data_dir)
        if not path.is_dir():
            raise UsageError(f"--data-dir {path} is not a folder; point it at a folder holding e.g. "
                             f"ml-latest-small/ratings.csv")
        os.environ[DATA_ENV] = str(path.absolute())


def _literal_description(entry: metadata.EntryPoint) -> str | None:
    """The ``description=`` of the entry's ``Study(...)`` read from its module's source without
    importing it (a string literal, or a module-level name bound to one); None when it is not
    written that way."""
    module, _, attr = entry.value.partition(":")
    try:
        spec = importlib.util.find_spec(module)
        tree = ast.parse(Path(spec.origin).read_bytes())
    except Exception:                          # noqa: BLE001 - any doubt: import the study instead
        return None
    constants = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                constants[target] = value.value
            elif target == attr and isinstance(value, ast.Call):
                for keyword in value.keywords:
                    if keyword.arg == "description":
                        if isinstance(keyword.value, ast.Constant) and isinstance(keyword.value.value, str):
                            return keyword.value.value
                        if isinstance(keyword.value, ast.Name):
                            return constants.get(keyword.value.id)
    return None


def cmd_list(args) -> int:
    found = studies()
    width = max(map(len, found), default=0)
    for name, entry in found.items():
        description = _literal_description(entry)
        if description is None:
            try:
                description = entry.load().description
            except Exception as err:           # noqa: BLE001 - one broken plugin must not hide the rest
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
    environment (`simrec.sharding.initialize`, waiting --peer-timeout seconds for the other
    processes) before any JAX work; whether this process writes. A multi-host run computes its
    cells in place (--executor local)."""
    from simrec import sharding
    try:
        started = sharding.initialize(args.coordinator, args.num_processes, args.process_id,
                                      timeout=args.peer_timeout)
    except sharding.DistributedError as err:
        raise UsageError(str(err)) from None
    if started and args.executor != "local":
        raise UsageError("a multi-host run (--coordinator or a cluster environment) computes its cells "
                         "on its own devices; drop --executor or use --executor local")
    return sharding.is_writer()


def _check_publish(args, sets: dict[str, str]) -> None:
    """--publish and --stale write the committed results: the preset as it is, seed 0, no --out."""
    publish = args.publish or args.stale
    flag = "--publish" if args.publish else "--stale"
    if publish and args.out:
        raise UsageError(f"{flag} writes into results/ by itself; drop --out (or drop {flag} and keep --out)")
    if publish and (sets or args.seed):
        raise UsageError(f"{flag} writes the committed results, which are the preset as it is with seed 0; "
                         f"drop --set/--seed, or write elsewhere with --out")


def cmd_run(args) -> int:
    sets = _parse_sets(args.set)
    _check_publish(args, sets)
    writer = _distributed(args)
    _set_data_dir(args)
    names = list(studies()) if args.study == "all" else [args.study]
    plans = []
    for name in names:                      # validate everything before computing anything
        study = load_study(name)
        plans.append((study, _config(study, args.preset, sets)))
    if args.stale:
        plans = _stale_plans(plans, args.preset, writer)
    with _executor(args) as executor:
        wrote_results = _run_plans(args, plans, sets, executor, writer)
    if wrote_results and writer:            # published: keep results/README.md current
        from simrec.output import write_results_index
        write_results_index(RESULTS)
    return 0


def _stale_plans(plans, preset: str, writer: bool) -> list:
    """The plans whose committed folder is missing or not `simrec.provenance.FRESH`."""
    from simrec import provenance
    keep = []
    for study, config in plans:
        folder = committed_folder(study.name, preset)
        status = provenance.check_folder(folder, {study.name: lambda study=study: study}) \
            if folder.is_dir() else None
        if status is not None and status.status == provenance.FRESH:
            if writer:
                print(f"{study.name}: {folder} is fresh, not regenerated")
        else:
            keep.append((study, config))
    return keep


@contextlib.contextmanager
def _executor(args):
    """The executor of ``--executor``/``--workers`` (validated before any cell), closed at the end."""
    from simrec.executor import open_executor, parse_executor
    executor = open_executor(parse_executor(args.executor, args.workers))
    try:
        yield executor
    finally:
        executor.close()


def _run_plans(args, plans, sets, executor, writer: bool) -> bool:
    """Run each (study, config); whether any run wrote into results/ (`writer`: this process
    writes, see `_distributed`). A run without --out into runs/ of a preset with committed results
    ends by comparing its files with them."""
    from simrec import provenance
    from simrec.runner import SetupMemo, default_cache_dir, run
    memo = SetupMemo()
    wrote_results = False
    publish = args.publish or args.stale
    for study, config in plans:
        if args.out:
            out = Path(args.out) / study.name if len(plans) > 1 else Path(args.out)
        else:
            out = default_out(study.name, args.preset, args.seed, sets, publish)
        # a run written into results/ (--publish, or e.g. --out results/STUDY_paper) is indexed
        wrote_results |= out.resolve().parent == RESULTS.resolve()
        summary = run(study, config, seed=args.seed, out=out, preset=args.preset,
                      cache_dir=default_cache_dir(out) if args.out else RUNS_CACHE,
                      progress=not args.quiet and writer, memo=memo, executor=executor,
                      allow_missing_data=args.allow_missing_data, force=args.force)
        if len(plans) > 1:                  # release this study's compiled programs: one process running
            import jax                      # every study otherwise runs out of memory maps (vm.max_map_count)
            jax.clear_caches()
        if not writer:
            continue
        print(f"{study.name}: {summary.cells_computed} cells computed, {summary.cells_cached} "
              f"cached, {summary.wall_time_s:.1f}s -> {summary.out}")
        committed = committed_folder(study.name, args.preset)
        if not args.out and not publish and not sets and not args.seed and committed.is_dir():
            comparison = provenance.compare_folders(out, committed)
            print(f"{study.name}: {comparison.line(committed)}")
            if not comparison.same:
                print(f"{study.name}: to replace the committed results with this run: "
                      f"simrec run {study.name}{'' if args.preset == 'default' else ' --preset ' + args.preset} --publish")
    return wrote_results


def cmd_results(args) -> int:
    """Every committed folder below --root as fresh / stale / foreign / unchecked
    (`simrec.provenance.check_folder`); nothing is computed."""
    from simrec import provenance
    _set_data_dir(args)
    root = Path(args.root)
    if not root.is_dir():
        raise UsageError(f"--root {root} is not a folder of committed results")
    found = studies()
    loaders = {name: functools.partial(load_study, name) for name in found}
    benches = {name: entry.value.partition(":")[0] for name, entry in entry_points(BENCH_GROUP).items()}
    statuses = [provenance.check_folder(folder, loaders, benches)
                for folder in sorted(p for p in root.iterdir() if (p / "manifest.json").is_file())]
    for status in statuses:
        print(status.line())
    counts = {s: sum(status.status == s for status in statuses) for s in
              (provenance.FRESH, provenance.STALE, provenance.FOREIGN, provenance.UNCHECKED)}
    print(f"{len(statuses)} folders: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    if any(status.status == provenance.STALE and status.default_preset for status in statuses):
        print("regenerate the stale default-preset folders with: simrec run all --stale")
    return 1 if args.strict and counts[provenance.STALE] else 0


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

    from simrec.runner import SetupMemo, atomic_write_text, default_cache_dir, run, write_table
    fields = config_fields(base)
    root = Path(args.out) if args.out else RUNS / study.name / f"sweep-{key}"
    # without --out, reuse the cells of earlier runs without --out (runs/.simrec-cache)
    cache = default_cache_dir(root / "x") if args.out else RUNS_CACHE
    memo = SetupMemo()
    common = dict(seed=args.seed, preset=args.preset, cache_dir=cache, progress=not args.quiet and writer,
                  memo=memo, executor=executor, allow_missing_data=args.allow_missing_data, force=args.force)
    if typing.get_origin(fields[key]) is tuple and key in study.report_fields and len(values) > 1:
        together = with_overrides(base, {**sets, key: ",".join(values)})
        summary = run(study, together, out=root / f"{key}=all", **common)
        if writer:
            print(f"{key}=all: {summary.cells_computed} computed, {summary.cells_cached} cached")
    combined: dict[str, list] = {}
    for value, config in configs:
        out = root / f"{key}={value}"
        summary = run(study, config, out=out, **common)
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

    def common(p, out_help: str):
        p.add_argument("--preset", default="default", help="smoke | default | paper (default: default)")
        p.add_argument("--seed", type=_seed, default=0, help=f"root seed in [0, {MAX_SEED}] (default 0)")
        p.add_argument("--out", default=None, help=out_help)
        p.add_argument("--force", action="store_true", help="replace an output folder that holds another "
                       "study's run")
        p.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="override a config field (dotted for nested fields; see simrec show STUDY)")
        p.add_argument("--data-dir", default=None, help=f"folder of real data sets (default ${DATA_ENV} "
                       "or ../shared/data beside the checkout)")
        p.add_argument("--allow-missing-data", action="store_true", help="run without absent data files "
                       "(the parts that need them are skipped and the README says so); without it an "
                       "absent file is an error")
        p.add_argument("--quiet", action="store_true", help="no progress display")
        p.add_argument("--executor", default="local", metavar="WHERE",
                       help="where cells are computed: local (default, this process), dask (a local "
                       "Dask cluster of --workers processes) or dask://HOST:PORT / tcp://HOST:PORT "
                       "(a running Dask scheduler); needs pip install 'simrec[cluster]'")
        p.add_argument("--workers", type=_workers, default=None, metavar="N",
                       help="cells computed at once: threads of --executor local (default: the "
                       "study's cell_threads) or worker processes of --executor dask (default: one per core)")
        p.add_argument("--coordinator", default=None, metavar="HOST:PORT",
                       help="multi-host run: the address of process 0 (with --num-processes and "
                       "--process-id; without them, SLURM / Open MPI / JAX_COORDINATOR_ADDRESS "
                       "environments are detected); process 0 alone writes (README 'Scaling out')")
        p.add_argument("--num-processes", type=int, default=None, metavar="N",
                       help="multi-host run: the number of processes")
        p.add_argument("--process-id", type=int, default=None, metavar="I",
                       help="multi-host run: this process's index in [0, N-1]")
        p.add_argument("--peer-timeout", type=_seconds, default=300.0, metavar="S",
                       help="multi-host run: seconds to wait for the other processes (default 300)")

    p_run = sub.add_parser("run", help="run a study (or all) and write its tables and figures",
                           add_help=False)
    p_run.add_argument("study")
    p_run.add_argument("-h", "--help", action="store_true", help="this help, and the study's keys")
    common(p_run, "output folder (default: runs/STUDY/PRESET[-seedS][-HASH]; with --publish "
                  "results/STUDY); a run without --out ends by comparing with results/STUDY")
    p_run.add_argument("--publish", action="store_true", help="write the committed results: results/STUDY "
                       "(results/STUDY_PRESET for other presets) and the results index")
    p_run.add_argument("--stale", action="store_true", help="only the studies whose committed results are "
                       "stale or missing (see simrec results), published into results/")
    p_sweep = sub.add_parser("sweep", help="run a study once per value of one config field")
    p_sweep.add_argument("field")
    p_sweep.add_argument("--study", required=True)
    p_sweep.add_argument("--values", required=True, help="comma-separated, e.g. 1,2,4,...,4096,inf")
    common(p_sweep, "output root, one folder FIELD=VALUE per value (default: runs/STUDY/sweep-FIELD)")
    p_results = sub.add_parser("results", help="which committed result folders the code and data still "
                               "produce (fresh / stale / foreign / unchecked)")
    p_results.add_argument("--root", default=str(RESULTS), help="folder of committed results (default results)")
    p_results.add_argument("--data-dir", default=None, help=f"folder of real data sets (default ${DATA_ENV} "
                           "or ../shared/data beside the checkout)")
    p_results.add_argument("--strict", action="store_true", help="exit with status 1 when a folder is stale")
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
    data_env = os.environ.get(DATA_ENV)                  # --data-dir sets it for this command only
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
        return {"list": cmd_list, "show": cmd_show, "run": cmd_run, "sweep": cmd_sweep,
                "results": cmd_results}[args.command](args)
    except KeyboardInterrupt as stop:
        if hasattr(stop, "cached"):         # simrec.runner.RunInterrupted
            done = (f"{stop.cached} of {stop.total} cells are cached; run the same command again to "
                    "resume" if stop.cached else "no cell had finished, so nothing is cached")
            print(f"simrec: interrupted during {stop.study}; {done}", file=sys.stderr)
        else:
            print("simrec: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        if not isinstance(err, _user_errors()):
            raise
        message = " ".join(str(err).split())          # one line, whatever the error holds
        print(f"simrec: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        if data_env is None:
            os.environ.pop(DATA_ENV, None)
        else:
            os.environ[DATA_ENV] = data_env


#: (module, exception names): errors a user can fix, printed as one line (module imported only if
#: it was already, since an error of an unloaded module cannot have been raised)
USER_ERRORS = (("simrec.runner", ("RecordError",)), ("simrec.output", ("OutputError",)),
               ("simrec.executor", ("ExecutorError",)), ("simrec.sharding", ("DistributedError",)),
               ("simrec.datafiles", ("MissingDataError", "UndeclaredDataError")), ("simrec.data", ("DataError",)),
               ("simrec.validate", ("MemoryLimitError",)))


def _user_errors() -> tuple[type, ...]:
    classes = [UsageError, ConfigError]
    for module, names in USER_ERRORS:
        if module in sys.modules:
            classes += [getattr(sys.modules[module], name) for name in names if hasattr(sys.modules[module], name)]
    return tuple(classes)


if __name__ == "__main__":
    sys.exit(main())
