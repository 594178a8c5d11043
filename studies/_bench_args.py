"""Command lines of the benchmarks (``simrec bench NAME``, studies/bench_*.py), checked while parsing.

`Parser` is an `argparse.ArgumentParser` whose errors end a benchmark the way ``simrec``'s own
parser ends a command: one line ``simrec bench NAME: error: MESSAGE`` on stderr and exit status 2,
with no usage dump and no traceback (`usage_errors` wraps a benchmark's ``main`` so that it
returns 2). `integer` and `number` make ``type=`` functions that check a value's range as the
command line is parsed and raise `argparse.ArgumentTypeError` naming the allowed range; argparse
puts the option in front, e.g. ``argument --users: expected an integer >= 1, got 0``. Checks that
involve several options go through ``parser.error`` right after parsing, with the same effect.
"""
from __future__ import annotations

import argparse
import functools
import math
import sys

__all__ = ["EXIT_USAGE", "UsageError", "Parser", "usage_errors", "integer", "number", "positive_int",
           "non_negative_int", "positive_float", "non_negative_float"]

EXIT_USAGE = 2                          # argparse's (and simrec's) exit status for a bad command line


class UsageError(Exception):
    """A bad benchmark command line: `prog` and the one-line `message` of `Parser.error`."""

    def __init__(self, prog: str, message: str):
        super().__init__(message)
        self.prog, self.message = prog, message


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises `UsageError` instead of printing its usage and exiting."""

    def error(self, message):
        raise UsageError(self.prog, " ".join(str(message).split()))


def usage_errors(main):
    """Decorate a benchmark's ``main(argv) -> int``: a `UsageError` of its parser becomes the line
    ``PROG: error: MESSAGE`` on stderr and the return value `EXIT_USAGE`."""
    @functools.wraps(main)
    def checked(argv=None) -> int:
        try:
            return main(argv)
        except UsageError as error:
            print(f"{error.prog}: error: {error.message}", file=sys.stderr)
            return EXIT_USAGE
    return checked


def integer(low: int, high: int | None = None):
    """A ``type=`` function for integers in [low, high] (no upper bound when high is None)."""
    wanted = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {value}")
        return value
    parse.__name__ = wanted
    return parse


def number(low: float, *, low_open: bool = False):
    """A ``type=`` function for finite numbers >= low (> low when low_open)."""
    wanted = f"a finite number {'>' if low_open else '>='} {low:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}") from None
        if not math.isfinite(value) or value < low or (low_open and value == low):
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text}")
        return value
    parse.__name__ = wanted
    return parse


positive_int = integer(1)
non_negative_int = integer(0)
positive_float = number(0.0, low_open=True)
non_negative_float = number(0.0)
