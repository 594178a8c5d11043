"""The benchmarks' command lines (studies/_bench_args.py): range-checked option types, and every
benchmark's bad option as one line `simrec bench NAME: error: ...` with exit status 2."""
import argparse

import pytest

from simrec import cli
from simrec_studies import _bench_args


@pytest.mark.parametrize("make, text, value", [
    (_bench_args.positive_int, "3", 3), (_bench_args.non_negative_int, "0", 0),
    (_bench_args.integer(2, 5), "5", 5), (_bench_args.positive_float, "0.5", 0.5),
    (_bench_args.non_negative_float, "0", 0.0), (_bench_args.number(1.0), "1e3", 1000.0),
])
def test_types_accept_values_in_range(make, text, value):
    assert make(text) == value and type(make(text)) is type(value)


@pytest.mark.parametrize("make, text, message", [
    (_bench_args.positive_int, "0", "expected an integer >= 1, got 0"),
    (_bench_args.positive_int, "1.5", "expected an integer >= 1, got '1.5'"),
    (_bench_args.non_negative_int, "-1", "expected an integer >= 0, got -1"),
    (_bench_args.integer(0, 9), "10", r"expected an integer in \[0, 9\], got 10"),
    (_bench_args.positive_float, "0", "expected a finite number > 0, got 0"),
    (_bench_args.positive_float, "nan", "expected a finite number > 0, got nan"),
    (_bench_args.positive_float, "inf", "expected a finite number > 0, got inf"),
    (_bench_args.non_negative_float, "-0.1", "expected a finite number >= 0, got -0.1"),
    (_bench_args.non_negative_float, "x", "expected a finite number >= 0, got 'x'"),
])
def test_types_name_the_allowed_range(make, text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=f"^{message}$"):
        make(text)


def test_a_parser_error_is_one_line_and_exit_status_2(capsys):
    @_bench_args.usage_errors
    def main(argv=None):
        parser = _bench_args.Parser(prog="simrec bench toy")
        parser.add_argument("--n", type=_bench_args.positive_int, default=1)
        return parser.parse_args(argv).n

    assert main(["--n", "4"]) == 4
    assert main(["--n", "0"]) == 2
    assert capsys.readouterr().err == "simrec bench toy: error: argument --n: expected an integer >= 1, got 0\n"


@pytest.mark.parametrize("name, argv, message", [
    ("metrics", ["--users", "0"], "argument --users: expected an integer >= 1, got 0"),
    ("feed", ["--sessions", "10"], "argument --sessions: expected an integer >= 1000, got 10"),
    ("feed", ["--users", "0"], "argument --users: expected an integer >= 1, got 0"),
    ("feed", ["--obp-rounds", "5"], "argument --obp-rounds: expected an integer >= 10, got 5"),
    ("feed", ["--iips-rounds", "1"], "argument --iips-rounds: expected an integer >= 2, got 1"),
    ("feed", ["--repeats", "0"], "argument --repeats: expected an integer >= 1, got 0"),
    ("feed", ["--days", "-1"], "argument --days: expected an integer >= 1, got -1"),
    ("opt_adg", ["--budgets", "5", "0"], "argument --budgets: expected a finite number > 0, got 0"),
    ("opt_adg", ["--tune-budget", "-1"], "argument --tune-budget: expected a finite number > 0, got -1"),
    ("opt_adg", ["--dim", "0"], "argument --dim: expected an integer >= 1, got 0"),
    ("opt_adg", ["--gamma", "nan"], "argument --gamma: expected a finite number > 0, got nan"),
    ("opt_adg", ["--lrs", "0.1", "0"], "argument --lrs: expected a finite number > 0, got 0"),
    ("opt_adg", ["--l2s", "-0.5"], "argument --l2s: expected a finite number >= 0, got -0.5"),
    ("opt_adg", ["--init-scale", "-1"], "argument --init-scale: expected a finite number >= 0, got -1"),
    ("opt_adg", ["--batch-size", "0"], "argument --batch-size: expected an integer >= 1, got 0"),
    ("opt_adg", ["--lightfm-lrs", "inf"], "argument --lightfm-lrs: expected a finite number > 0, got inf"),
    ("opt_adg", ["--lightfm-alphas", "-0.001"], "argument --lightfm-alphas: expected a finite number >= 0, got -0.001"),
    ("opt_adg", ["--edge-steps", "-1"], "argument --edge-steps: expected an integer >= 0, got -1"),
    ("opt_adg", ["--presets", "nowhere"], "argument --presets: invalid choice: 'nowhere'"),
    ("scale", ["--repeats", "0"], "argument --repeats: expected an integer >= 1, got 0"),
    ("scale", ["--paper-sessions", "1"], "argument --paper-sessions: expected an integer >= 2, got 1"),
    ("scale", ["--paper-users", "0"], "argument --paper-users: expected an integer >= 1, got 0"),
    ("scale", ["--paper-items", "9"], "argument --paper-items: expected an integer >= 10, got 9"),
    ("scale", ["--paper-items", "15838"], "--paper-items 15838 is a multiple of the slot stride 7919"),
    ("scale", ["--device-sessions", "1"], "argument --device-sessions: expected an integer >= 2, got 1"),
    ("scale", ["--seed", "-1"], r"argument --seed: expected an integer in [0, 4294967295], got -1"),
    ("scale", ["--seed", "4294967296"], r"argument --seed: expected an integer in [0, 4294967295], got 4294967296"),
])
def test_every_benchmark_refuses_a_bad_number_in_one_line(capsys, name, argv, message):
    """Before, e.g. `simrec bench metrics --users 0` and `bench scale --paper-items 7919` crashed
    with a traceback, and bench feed/scale printed argparse's usage block."""
    assert cli.main(["bench", name, *argv]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"simrec bench {name}: error: {message}"), captured.err
    assert "Traceback" not in captured.err and "usage:" not in captured.err and captured.out == ""
