"""Committed results are the code's: every committed default-preset folder is what the code, the
preset and the data here produce (`simrec.provenance.check_folder`; nothing is computed).

A stale default-preset folder fails, naming the command that regenerates it. Other committed
folders (a study's ``paper`` preset, benchmark outputs) are too slow to regenerate on every change:
they are checked the same way and reported as skips, never failures. Differing package versions
never fail (CI installs the newest releases).
"""
from __future__ import annotations

import functools
from pathlib import Path

import pytest

from simrec import cli, provenance

RESULTS = Path(__file__).resolve().parent.parent / "results"
FOLDERS = sorted(p for p in RESULTS.iterdir() if (p / "manifest.json").is_file()) if RESULTS.is_dir() else []


def _check(folder: Path) -> provenance.FolderStatus:
    loaders = {name: functools.partial(cli.load_study, name) for name in cli.studies()}
    benches = {name: entry.value.partition(":")[0] for name, entry in cli.entry_points(cli.BENCH_GROUP).items()}
    return provenance.check_folder(folder, loaders, benches)


def test_every_study_has_committed_default_results():
    assert {p.name for p in FOLDERS} >= set(cli.studies())


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
