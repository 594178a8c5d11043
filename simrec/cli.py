"""Command line: ``simrec list | run STUDY | run all | sweep FIELD | bench NAME``.

Errors a user can fix (unknown study, preset, config key, a value of the wrong type) print one
line naming the problem and the valid choices and exit with status 2, without a traceback.
"""
from __future__ import annotations

import argparse
import functools
import math
import sys
from pathlib import Path

from simrec.runner import ConfigError, config_fields, run, with_overrides, write_results_index

EXIT_USAGE = 2


class UsageError(Exception):
    """A mistake in the command line; printed as one line, exit status 2."""


def _registry():
    import studies
    return studies


def _parse_sets(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--set expects key=value, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def _study(name: str):
    reg = _registry()
    if name not in reg.STUDIES:
        raise UsageError(f"unknown study {name!r}; choose one of: {', '.join(reg.STUDIES)}, all")
    return reg.load_study(name)


def _config(study, preset: str, sets: dict[str, str]):
    return with_overrides(study.preset(preset), sets)


def cmd_list(args) -> int:
    reg = _registry()
    width = max(map(len, reg.STUDIES), default=0)
    for name in reg.STUDIES:
        print(f"{name:<{width}}  {reg.load_study(name).description}")
    if reg.BENCHES:
        print("\nbenchmarks (simrec bench NAME): " + ", ".join(reg.BENCHES))
    return 0


def cmd_run(args) -> int:
    reg = _registry()
    names = list(reg.STUDIES) if args.study == "all" else [args.study]
    sets = _parse_sets(args.set)
    plans = []
    for name in names:                      # validate everything before computing anything
        study = _study(name)
        plans.append((study, _config(study, args.preset, sets)))
    for study, config in plans:
        out = Path(args.out) / study.name if (args.out and len(plans) > 1) else \
            Path(args.out or Path("results") / study.name)
        summary = run(study, config, seed=args.seed, out=out, preset=args.preset,
                      progress=not args.quiet)
        print(f"{study.name}: {summary.cells_computed} cells computed, {summary.cells_cached} "
              f"cached, {summary.wall_time_s:.1f}s -> {summary.out}")
    if args.out is None:                      # default location: keep results/README.md current
        write_results_index(Path("results"))
    return 0


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
    """Run one study once per value of a config field; outputs go to OUT/FIELD=VALUE/.

    Cells are cached in results/STUDY/.cache (OUT/.cache with --out), so a sweep reuses the cells
    of an earlier `simrec run STUDY`. When the field is a tuple that the study declares a report
    field (its points are cells, e.g. the clipping grid m of `sensitivity`), the study first runs
    once over all values together (OUT/FIELD=all/), so that it can compute every setting in one
    vectorised pass; the per-value runs then read their cells from the cache.
    """
    import typing

    import pandas as pd

    from simrec.runner import atomic_write_text, write_table
    study = _study(args.study)
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
    root = Path(args.out or Path("results") / f"sweep-{study.name}-{key}")
    cache = root / ".cache" if args.out else Path("results") / study.name / ".cache"
    if typing.get_origin(fields[key]) is tuple and key in study.report_fields and len(values) > 1:
        together = with_overrides(base, {**sets, key: ",".join(values)})
        summary = run(study, together, seed=args.seed, out=root / f"{key}=all", preset=args.preset,
                      cache_dir=cache, progress=not args.quiet)
        print(f"{key}=all: {summary.cells_computed} computed, {summary.cells_cached} cached")
    combined: dict[str, list] = {}
    for value, config in configs:
        out = root / f"{key}={value}"
        summary = run(study, config, seed=args.seed, out=out, preset=args.preset,
                      cache_dir=cache, progress=not args.quiet)
        print(f"{key}={value}: {summary.cells_computed} computed, {summary.cells_cached} cached")
        for csv in sorted(out.glob("table*.csv")):
            frame = pd.read_csv(csv)
            frame.insert(0, key if key not in frame.columns else f"sweep {key}", value)
            combined.setdefault(csv.stem, []).append(frame)
    for name, frames in combined.items():
        write_table(root, name, pd.concat(frames, ignore_index=True))
    atomic_write_text(root / "README.md", f"# sweep of `{key}` over {', '.join(values)} "
                      f"for study `{study.name}`\n\nOne folder per value; `table*` here stack "
                      f"them with a `{key}` column.\n")
    print(f"sweep -> {root}")
    return 0


def cmd_bench(args, rest: list[str]) -> int:
    reg = _registry()
    if args.name not in reg.BENCHES:
        raise UsageError(f"unknown benchmark {args.name!r}; choose one of: {', '.join(reg.BENCHES)}")
    return int(reg.load_bench(args.name)(rest) or 0)


class _Parser(argparse.ArgumentParser):
    def error(self, message):                 # one line, exit 2, no usage dump
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="simrec", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sub.add_parser("list", help="list studies with a one-line description")

    def common(p):
        p.add_argument("--preset", default="default", help="smoke | default | paper")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--out", default=None, help="output folder (default results/STUDY)")
        p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field")
        p.add_argument("--quiet", action="store_true", help="no progress bar")

    p_run = sub.add_parser("run", help="run a study (or all) and write its tables and figures")
    p_run.add_argument("study")
    common(p_run)
    p_sweep = sub.add_parser("sweep", help="run a study once per value of one config field")
    p_sweep.add_argument("field")
    p_sweep.add_argument("--study", required=True)
    p_sweep.add_argument("--values", required=True, help="comma-separated, e.g. 1,2,4,inf")
    common(p_sweep)
    p_bench = sub.add_parser("bench", help="run a benchmark (extra arguments go to it)")
    p_bench.add_argument("name")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    try:
        args, rest = parser.parse_known_args(argv)
        if args.command == "bench":
            return cmd_bench(args, rest)
        if rest:
            raise UsageError(f"unrecognised arguments: {' '.join(rest)}")
        return {"list": cmd_list, "run": cmd_run, "sweep": cmd_sweep}[args.command](args)
    except (UsageError, ConfigError) as err:
        print(f"simrec: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("simrec: interrupted; finished cells are cached, run again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
