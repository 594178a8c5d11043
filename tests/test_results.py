"""Committed results are the code's: every committed default-preset folder is what the code, the
preset and the data here produce (`simrec.provenance.check_folder`; nothing is computed).

A stale default-preset folder fails, naming the command that regenerates it. Other committed
folders (a study's ``paper`` preset, benchmark outputs) are too slow to regenerate on every change:
they are checked the same way and reported as skips, never failures. Differing package versions
never fail (CI installs the newest releases).
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from simrec import cli, output, provenance

RESULTS = Path(__file__).resolve().parent.parent / "results"
FOLDERS = sorted(p for p in RESULTS.iterdir() if (p / "manifest.json").is_file()) if RESULTS.is_dir() else []


def _check(folder: Path) -> provenance.FolderStatus:
    loaders = {name: functools.partial(cli.load_study, name) for name in cli.studies()}
    benches = {name: entry.value.partition(":")[0] for name, entry in cli.entry_points(cli.BENCH_GROUP).items()}
    return provenance.check_folder(folder, loaders, benches)


def test_every_study_has_committed_default_results():
    assert {p.name for p in FOLDERS} >= set(cli.studies())


def test_the_committed_claims_page_is_the_committed_claims_tables():
    if not FOLDERS:
        pytest.skip("no committed results")
    assert (RESULTS / "claims.md").read_text() == output.claims_page(RESULTS), (
        "results/claims.md is not what the committed claims tables give: rewrite it with "
        "`python -c \"from simrec import output; output.write_results_index('results')\"`")


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_committed_results_are_fresh(folder):
    status = _check(folder)
    if status.status == provenance.UNCHECKED:
        pytest.skip(f"{folder.name}: {'; '.join(status.reasons)}")
    if not status.default_preset:
        if status.status != provenance.FRESH:
            pytest.skip(f"reported, not failed: {status.line()}")
        return
    assert status.status == provenance.FRESH, (
        f"results/{folder.name} is {status.status} ({'; '.join(status.reasons)}); regenerate it with "
        f"`{status.command}`, or every stale folder with `simrec run all --stale`")


@pytest.mark.parametrize("name", cli.studies())
def test_a_studys_declared_default_time_is_its_committed_wall_time_within_a_factor_of_two(name):
    """`simrec run` and `simrec show` quote `Study.expected_seconds`; the committed default run
    measured the time on the reference machine (manifest: the wall time of a run that computed every
    cell, else setup and the cells' own recorded seconds, shared among the executor's workers)."""
    path = RESULTS / name / "manifest.json"
    if not path.is_file():
        pytest.skip(f"results/{name} is not committed")
    manifest = json.loads(path.read_text())
    cells = manifest["cells"]
    measured = (manifest["wall_time_s"] if cells["computed"] == cells["total"]
                else manifest["setup_s"] + cells["compute_s"] / (manifest["executor"].get("workers") or 1))
    declared = cli.load_study(name).expected_seconds["default"]
    assert declared / 2 <= measured <= declared * 2, (
        f"{name}: Study.expected_seconds['default'] = {declared} s, but results/{name} took {measured:.0f} s: "
        f"declare the measured time")
