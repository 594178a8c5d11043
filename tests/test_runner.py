"""Runner: the study protocol, caching, resumption, the code version, the output folder."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field, replace
from typing import Literal

import jax
import numpy as np
import pandas as pd
import pytest

from simrec import output, reporting, runner
from simrec.runner import ConfigError, OutputError, RecordError, Report, Study


@dataclass(frozen=True)
class Inner:
    days: int = 3          # days per cell
    scale: float = 1.0     # multiplies every value


@dataclass(frozen=True)
class ToyConfig:
    rates: tuple[float, ...] = (0.1, 0.5, 1.0)   # one cell per rate and draw
    draws: int = 3                               # draws per rate
    name: str = "toy"
    kind: Literal["a", "b"] = "a"
    flag: bool = False
    inner: Inner = field(default_factory=Inner)

    def __post_init__(self):
        if self.draws < 1:
            raise ValueError(f"draws must be >= 1, got {self.draws}")


CALLS = {"n": 0, "setup": 0, "fail_after": None}


def toy_cells(config):
    return [{"rate": r, "draw": d} for r in config.rates for d in range(config.draws)]


def toy_setup(key, config):
    CALLS["setup"] += 1
    return {"offset": float(jax.random.uniform(runner.shared_key(key, "world")))}


def toy_compute(key, config, cell, shared):
    CALLS["n"] += 1
    if CALLS["fail_after"] is not None and CALLS["n"] > CALLS["fail_after"]:
        raise KeyboardInterrupt("simulated kill")
    x = jax.random.uniform(runner.cell_key(key, cell), (5,))
    return [{"rate": cell["rate"], "draw": cell["draw"], "i": i,
             "value": float(cell["rate"] * x[i] * config.inner.scale + shared["offset"])} for i in range(5)]


def toy_report(config, records):
    import matplotlib.pyplot as plt
    table = records.groupby("rate", as_index=False)["value"].mean()
    fig, ax = plt.subplots()
    ax.plot(table["rate"], table["value"])
    return Report(tables={"table_toy": table}, figures={"fig_toy": fig}, summary="A toy.")


TOY = Study("toy", "a toy study", {"smoke": ToyConfig(draws=1), "default": ToyConfig()},
            toy_cells, toy_compute, toy_report,
            columns={"rate": float, "draw": int, "i": int, "value": float}, setup=toy_setup,
            cache_setup=True, expected_seconds={"smoke": 1, "default": 2})


@pytest.fixture(autouse=True)
def _reset_calls():
    CALLS.update(n=0, setup=0, fail_after=None)


def _outputs(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
            if p.is_file() and p.name != "manifest.json"}


def test_run_writes_tables_figures_records_manifest_and_readme(tmp_path):
    summary = runner.run(TOY, ToyConfig(), seed=3, out=tmp_path / "out", preset="default",
                         progress=False)
    files = _outputs(tmp_path / "out")
    for name in ("table_toy.csv", "table_toy.md", "table_toy.tex", "fig_toy.png", "README.md", "records.csv"):
        assert name in files
    assert files["fig_toy.png"].startswith(b"\x89PNG")
    records = pd.read_csv(tmp_path / "out" / "records.csv")
    assert list(records.columns) == ["rate", "draw", "i", "value"] and len(records) == 9 * 5
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["seed"] == 3 and manifest["config"]["inner"]["days"] == 3
    cells = manifest["cells"]
    assert {k: cells[k] for k in ("total", "computed", "cached")} == {"total": 9, "computed": 9, "cached": 0}
    assert 0 <= cells["compute_s"] <= manifest["wall_time_s"]
    assert manifest["records"]["columns"] == {"rate": "float", "draw": "int", "i": "int", "value": "float"}
    assert {"python", "jax", "numpy"} <= set(manifest["versions"])
    cpu = manifest["machine"]["cpu"]                            # the CPU, whose SIMD set XLA compiles for
    assert cpu["model"] and set(cpu["simd"]) <= set(runner.SIMD_FLAGS)
    assert "tests.test_runner" in manifest["code_modules"]
    assert "wall_time_s" in manifest and "git_commit" in manifest
    assert summary.cells_computed == 9 and CALLS["setup"] == 1
    assert not (tmp_path / "out" / ".cache").exists()          # caches live beside, not inside
    assert not list(tmp_path.glob(".out.incomplete-*"))


def test_kill_mid_sweep_then_resume_gives_identical_outputs(tmp_path):
    runner.run(TOY, ToyConfig(), seed=0, out=tmp_path / "clean", progress=False)

    CALLS.update(n=0, fail_after=4)
    with pytest.raises(runner.RunInterrupted) as stop:
        runner.run(TOY, ToyConfig(), seed=0, out=tmp_path / "resumed", cache_dir=tmp_path / "c",
                   progress=False)
    assert (stop.value.cached, stop.value.total) == (4, 9)
    assert len(list((tmp_path / "c" / "toy").glob("*.json"))) == 4
    assert not (tmp_path / "resumed").exists()                  # nothing half-written
    assert not list(tmp_path.rglob("*.tmp")) and not list(tmp_path.glob(".resumed.incomplete-*"))

    CALLS.update(n=0, fail_after=None, setup=0)
    summary = runner.run(TOY, ToyConfig(), seed=0, out=tmp_path / "resumed", cache_dir=tmp_path / "c",
                         progress=False)
    assert (summary.cells_computed, summary.cells_cached) == (5, 4)
    assert CALLS["n"] == 5 and CALLS["setup"] == 0              # the setup came from its disk cache
    assert _outputs(tmp_path / "clean") == _outputs(tmp_path / "resumed")

    CALLS.update(n=0)
    again = runner.run(TOY, ToyConfig(), seed=0, out=tmp_path / "resumed", cache_dir=tmp_path / "c",
                       progress=False)
    assert again.cells_computed == 0 and CALLS["n"] == 0
    assert _outputs(tmp_path / "clean") == _outputs(tmp_path / "resumed")


def test_setup_is_skipped_when_every_cell_is_cached_and_memoised_across_runs(tmp_path):
    memo = runner.SetupMemo()
    study = replace(TOY, cache_setup=False)
    runner.run(study, ToyConfig(), out=tmp_path / "a", progress=False, memo=memo)
    runner.run(study, ToyConfig(rates=(0.1, 0.5, 1.0, 2.0)), out=tmp_path / "b", progress=False, memo=memo)
    runner.run(study, ToyConfig(), out=tmp_path / "a", progress=False)
    assert CALLS["setup"] == 2                       # new config: a new setup; all cached: none


def test_seed_and_config_change_the_cache_address(tmp_path):
    a = runner.run(TOY, ToyConfig(), seed=0, out=tmp_path / "a", progress=False)
    b = runner.run(TOY, ToyConfig(), seed=1, out=tmp_path / "a", progress=False)
    c = runner.run(TOY, ToyConfig(inner=Inner(scale=2.0)), seed=0, out=tmp_path / "a", progress=False)
    assert a.cells_computed == b.cells_computed == c.cells_computed == 9


@pytest.mark.parametrize("seed", [-1, 2**32, 1.5, True, "3"])
def test_seeds_are_validated(tmp_path, seed):
    with pytest.raises(ConfigError, match="seed must be an integer in"):
        runner.run(TOY, ToyConfig(), seed=seed, out=tmp_path / "x", progress=False)
    assert CALLS["n"] == 0


def test_cell_keys_are_deterministic_and_independent_of_other_cells():
    root = jax.random.key(0)
    k1 = jax.random.key_data(runner.cell_key(root, {"rate": 0.1, "draw": 2}))
    k2 = jax.random.key_data(runner.cell_key(root, {"draw": 2, "rate": 0.1}))
    k3 = jax.random.key_data(runner.cell_key(root, {"rate": 0.1, "draw": 3}))
    assert runner.key_id(runner.shared_key(root, "world")) != runner.key_id(runner.shared_key(root, "x"))
    np.testing.assert_array_equal(k1, k2)
    assert not np.array_equal(k1, k3)


# ---- configs --------------------------------------------------------------------------------

def test_overrides_parse_types_and_nested_fields():
    cfg = runner.with_overrides(ToyConfig(), {"rates": "0.2,0.4", "inner.days": "7", "flag": "true",
                                              "kind": "b", "inner.scale": "inf"})
    assert cfg.rates == (0.2, 0.4) and cfg.inner.days == 7 and cfg.flag is True and cfg.kind == "b"
    assert cfg.inner.scale == float("inf")


@pytest.mark.parametrize("overrides, message", [
    ({"nope": "1"}, "unknown config key 'nope'; valid keys: draws, flag, inner.days"),
    ({"inner.dayz": "1"}, "unknown config key 'inner.dayz'"),
    ({"inner.days": "abc"}, "config key 'inner.days' expects int, got 'abc'"),      # prefix kept
    ({"draws": "many"}, "config key 'draws' expects int, got 'many'"),
    ({"flag": "maybe"}, "expects bool"),
    ({"kind": "c"}, "is not one of a, b"),
    ({"draws": "0"}, "draws must be >= 1"),
])
def test_bad_overrides_raise_config_errors(overrides, message):
    with pytest.raises(ConfigError, match=message):
        runner.with_overrides(ToyConfig(), overrides)


def test_config_help_reads_each_fields_comment():
    rows = {key: (tp, default, meaning) for key, tp, default, meaning in runner.config_help(ToyConfig())}
    assert rows["draws"] == ("int", 3, "draws per rate")
    assert rows["inner.scale"] == ("float", 1.0, "multiplies every value")
    assert rows["name"] == ("str", "toy", "")


def test_unknown_preset_names_the_choices():
    with pytest.raises(ConfigError, match="choose one of: smoke, default"):
        TOY.preset("huge")


# ---- records --------------------------------------------------------------------------------

@pytest.mark.parametrize("records, message", [
    ({"rate": 1.0}, "must return a list of records"),
    ([{"rate": 1.0, "draw": 0, "i": 0}], r"missing \['value'\]"),
    ([{"rate": 1.0, "draw": 0, "i": 0, "value": 1.0, "extra": 1}], r"undeclared \['extra'\]"),
    ([{"rate": 1.0, "draw": 0.5, "i": 0, "value": 1.0}], "column 'draw' is declared int"),
    ([{"rate": 1.0, "draw": True, "i": 0, "value": 1.0}], "column 'draw' is declared int"),
    ([{"rate": "x", "draw": 0, "i": 0, "value": 1.0}], "column 'rate' is declared float"),
])
def test_records_must_match_the_declared_columns(tmp_path, records, message):
    bad = replace(TOY, compute=lambda key, config, cell, shared: records)
    with pytest.raises(RecordError, match=message):
        runner.run(bad, ToyConfig(draws=1), out=tmp_path / "out", progress=False)
    assert not list(tmp_path.rglob("*.tmp")) and not (tmp_path / "out").exists()


def test_records_accept_numpy_and_jax_scalars_and_missing_floats():
    rows = runner.check_records(TOY, {}, [{"rate": np.float32(0.5), "draw": np.int64(2), "i": jax.numpy.int32(1),
                                           "value": None}])
    assert rows[0][:3] == [0.5, 2, 1] and np.isnan(rows[0][3])
    frame = runner.records_frame(TOY, rows)
    assert list(frame.dtypes.astype(str)) == ["float64", "int64", "int64", "float64"]


def test_study_declarations_are_validated():
    with pytest.raises(ValueError, match="column 'x' has type"):
        replace(TOY, columns={"x": list})
    with pytest.raises(ValueError, match="needs a 'default' preset"):
        replace(TOY, presets={"smoke": ToyConfig()})


# ---- tables and index -----------------------------------------------------------------------

def test_table_writers_format_and_escape(tmp_path):
    frame = pd.DataFrame({"metric": ["ADG_obs", "**best**"], "value": [0.123456, float("nan")],
                          "p": [1e-12, float("inf")]})
    runner.write_table(tmp_path, "table_x", frame)
    md = (tmp_path / "table_x.md").read_text()
    tex = (tmp_path / "table_x.tex").read_text()
    csv = (tmp_path / "table_x.csv").read_text()
    assert "| ADG_obs | 0.1235 | 1e-12 |" in md and "–" in md and "∞" in md
    assert r"ADG\_obs" in tex and r"\textbf{best}" in tex and r"$\infty$" in tex
    assert "0.123456" in csv


def test_files_respect_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        runner.run(TOY, ToyConfig(draws=1), out=tmp_path / "out", progress=False)
    finally:
        os.umask(old)
    for path in (tmp_path / "out").iterdir():
        assert path.stat().st_mode & 0o777 == 0o640, path


def test_to_json_converts_arrays_and_non_finite_values():
    out = runner.to_json({"a": np.arange(3), "b": jax.numpy.float32(1.5), "c": (np.inf, np.nan)})
    assert out["a"] == [0, 1, 2] and out["b"] == 1.5 and out["c"][0] == float("inf")


def test_a_report_rendered_from_the_cache_keeps_what_computing_the_cells_cost(tmp_path):
    """Cache entries record each cell's compute time, so a re-render (e.g. after editing only the
    report) still says what a cold run costs; entries written before that record say so."""
    cache = tmp_path / "cache"
    first = runner.run(TOY, ToyConfig(), seed=0, out=tmp_path / "toy", cache_dir=cache, progress=False)
    computed = json.loads((tmp_path / "toy" / "manifest.json").read_text())["cells"]["compute_s"]
    again = runner.run(TOY, ToyConfig(), seed=0, out=tmp_path / "toy", cache_dir=cache, progress=False)
    cells = json.loads((tmp_path / "toy" / "manifest.json").read_text())["cells"]
    assert (first.cells_computed, again.cells_cached) == (9, 9)
    assert cells["compute_s"] == computed
    assert f"(9 of 9 cells cached; computing every cell took {computed:.0f} s)" in \
        runner.write_results_index(tmp_path).read_text()
    entry = next((cache / "toy").glob("*.json"))
    old = json.loads(entry.read_text())
    del old["seconds"]                                  # an entry from before the record
    entry.write_text(json.dumps(old))
    runner.run(TOY, ToyConfig(), seed=0, out=tmp_path / "toy", cache_dir=cache, progress=False)
    assert json.loads((tmp_path / "toy" / "manifest.json").read_text())["cells"]["compute_s"] is None
    assert "(9 of 9 cells cached) |" in runner.write_results_index(tmp_path).read_text()


def test_results_index_lists_every_study_folder(tmp_path):
    runner.run(TOY, ToyConfig(draws=1), seed=0, out=tmp_path / "toy", preset="smoke", progress=False)
    index = runner.write_results_index(tmp_path).read_text()
    assert "| [toy](toy/README.md) | a toy study | smoke | 0 |" in index
    assert "[table_toy](toy/table_toy.md)" in index and "[fig_toy](toy/fig_toy.png)" in index


def _claims_folder(root, name: str, preset: str, rows: list[tuple[str, str, str]], files=()):
    """A study folder with a manifest and a claims table of (source, verdict, evidence) rows."""
    folder = root / name
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"study": name, "preset": preset, "seed": 0,
                                                      "wall_time_s": 1.0, "files": []}))
    pd.DataFrame([(source, f"claim {i}", "1.0", "0.9", "0.1", verdict, where)
                  for i, (source, verdict, where) in enumerate(rows)],
                 columns=list(reporting.CLAIM_COLUMNS)).to_csv(folder / "table_claims.csv", index=False)
    for file in files:
        (folder / file).write_text("")


def test_the_claims_page_gathers_every_default_presets_claims_by_cited_work_and_other_presets_apart(tmp_path):
    _claims_folder(tmp_path, "alpha", "default", [("Lim et al. RecSys'15, Table 1", "reproduced", "table_a"),
                                                  ("Lim et al. RecSys'15 §2", "tie", "table_a, fig_b (left)"),
                                                  ("Other, Some note", "not reproduced", "")],
                   files=("table_a.md", "fig_b.png"))
    _claims_folder(tmp_path, "beta", "default", [("Lim et al. RecSys'15, Thm 1", "reproduced", "table_gone")])
    _claims_folder(tmp_path, "beta_paper", "paper", [("Lim et al. RecSys'15, Thm 1", "tie", "")])
    runner.write_results_index(tmp_path)
    page = (tmp_path / "claims.md").read_text()
    assert page == output.claims_page(tmp_path)
    head = "| Lim et al. RecSys'15 | 2 | 0 | 1 | 0 | 0 | 3 | [alpha](alpha/README.md), [beta](beta/README.md) |"
    assert head in page and "| Other, Some note | 0 | 1 | 0 | 0 | 0 | 1 | [alpha](alpha/README.md) |" in page
    assert page.index(head) < page.index("| Other, Some note |")          # most claims first
    assert "| all | 2 | 1 | 1 | 0 | 0 | 4 | |" in page                    # the paper preset is apart
    other = page[page.index("## Other presets"):]
    assert "| [beta_paper](beta_paper/README.md) | Lim et al. RecSys'15 | 0 | 0 | 1 | 0 | 0 | 1 |" in other
    assert "### beta_paper" in other and "| Thm 1: claim 0 | 1.0 | 0.9 | 0.1 | tie | [beta_paper](beta_paper/README.md) |" \
        in other and "alpha" not in other
    assert "| §2: claim 1 | 1.0 | 0.9 | 0.1 | tie | [alpha](alpha/README.md): [table_a](alpha/table_a.md), " \
           "[fig_b](alpha/fig_b.png) (left) |" in page
    assert "| Thm 1: claim 0 | 1.0 | 0.9 | 0.1 | reproduced | [beta](beta/README.md): table_gone |" in page
    assert "[claims.md](claims.md)" in (tmp_path / "README.md").read_text()


# ---- the cache ------------------------------------------------------------------------------

def test_corrupt_cache_files_are_recomputed_with_a_warning_naming_them(tmp_path):
    runner.run(TOY, ToyConfig(draws=1), out=tmp_path / "out", progress=False)
    victim = sorted((tmp_path / ".simrec-cache" / "toy").glob("*.json"))[0]
    victim.write_text("{not json")
    CALLS.update(n=0)
    with pytest.warns(runner.CacheWarning, match=str(victim)):
        summary = runner.run(TOY, ToyConfig(draws=1), out=tmp_path / "out", progress=False)
    assert summary.cells_computed == 1 and CALLS["n"] == 1
    json.loads(victim.read_text())                                  # rewritten whole


@pytest.mark.parametrize("tamper, reason", [
    (lambda e: {**e, "rows": []}, "do not match their digest"),
    (lambda e: {**e, "rows": [row[:-1] for row in e["rows"]]}, "does not have the 4 declared columns"),
    (lambda e: {**e, "rows": [row[:3] + ["x"] for row in e["rows"]]}, "column 'value' holds 'x', not float"),
    (lambda e: {**e, "rows": [[row[0], True] + row[2:] for row in e["rows"]]}, "column 'draw' holds True, not int"),
    (lambda e: {**e, "columns": ["rate", "draw", "value", "i"]}, "are not the declared"),
    (lambda e: {**e, "cell": {"rate": 9.0, "draw": 0}}, "not {'rate'"),
    (lambda e: {k: v for k, v in e.items() if k != "rows_sha256"}, "do not match their digest"),
])
def test_cache_entries_that_do_not_match_the_declared_columns_are_recomputed(tmp_path, tamper, reason):
    first = runner.run(TOY, ToyConfig(draws=1), out=tmp_path / "out", progress=False)
    reference = _outputs(tmp_path / "out")
    victim = sorted((tmp_path / ".simrec-cache" / "toy").glob("*.json"))[0]
    victim.write_text(json.dumps(tamper(json.loads(victim.read_text())), allow_nan=True))
    CALLS.update(n=0)
    with pytest.warns(runner.CacheWarning, match=reason):
        summary = runner.run(TOY, ToyConfig(draws=1), out=tmp_path / "out", progress=False)
    assert first.cells_computed == 3 and summary.cells_computed == 1 and CALLS["n"] == 1
    assert _outputs(tmp_path / "out") == reference


def _data_study(files=("set/ratings.csv",)):
    """TOY whose cells add the number of lines of a real-data file to every value."""
    from simrec import datafiles

    def compute(key, config, cell, shared):
        lines = len(datafiles.data_file(files[0]).read_text().splitlines())
        return [{**row, "value": row["value"] + lines} for row in toy_compute(key, config, cell, shared)]
    return replace(TOY, compute=compute, data_files=lambda config: list(files))


def test_data_files_enter_the_address_so_edited_data_is_recomputed(tmp_path, monkeypatch):
    data = tmp_path / "data"
    (data / "set").mkdir(parents=True)
    (data / "set" / "ratings.csv").write_text("a\nb\n")
    monkeypatch.setenv("SIMREC_DATA", str(data))
    study = _data_study()
    runner.run(study, ToyConfig(draws=1), out=tmp_path / "out", progress=False)
    before = pd.read_csv(tmp_path / "out" / "records.csv")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    import hashlib
    assert manifest["data"] == [{"file": "set/ratings.csv", "path": str(data / "set" / "ratings.csv"),
                                 "bytes": 4, "sha256": hashlib.sha256(b"a\nb\n").hexdigest()}]
    assert "`set/ratings.csv`: 4 bytes, sha256" in (tmp_path / "out" / "README.md").read_text()
    (data / "set" / "ratings.csv").write_text("a\nb\nc\n")              # edited in place
    CALLS.update(n=0)
    summary = runner.run(study, ToyConfig(draws=1), out=tmp_path / "out", progress=False)
    assert summary.cells_computed == 3 and CALLS["n"] == 3
    after = pd.read_csv(tmp_path / "out" / "records.csv")
    np.testing.assert_allclose(after.value - before.value, 1.0)
    other = tmp_path / "other"                                       # another folder, same bytes
    (other / "set").mkdir(parents=True)
    (other / "set" / "ratings.csv").write_text("a\nb\nc\n")
    monkeypatch.setenv("SIMREC_DATA", str(other))
    CALLS.update(n=0)
    assert runner.run(study, ToyConfig(draws=1), out=tmp_path / "out", progress=False).cells_computed == 0


def test_missing_data_is_an_error_unless_allowed_and_undeclared_files_are_refused(tmp_path, monkeypatch):
    from simrec import datafiles
    monkeypatch.setenv("SIMREC_DATA", str(tmp_path / "nothing"))
    with pytest.raises(datafiles.MissingDataError, match=r"1 data file\(s\) not found .*set/ratings.csv.*"
                                                         r"--allow-missing-data"):
        runner.run(_data_study(), ToyConfig(draws=1), out=tmp_path / "out", progress=False)
    assert CALLS["n"] == 0 and not (tmp_path / "out").exists()
    skipping = replace(_data_study(), compute=toy_compute)
    runner.run(skipping, ToyConfig(draws=1), out=tmp_path / "out", progress=False, allow_missing_data=True)
    assert "`set/ratings.csv`: not found" in (tmp_path / "out" / "README.md").read_text()
    (tmp_path / "d" / "set").mkdir(parents=True)
    (tmp_path / "d" / "set" / "ratings.csv").write_text("a\n")
    (tmp_path / "d" / "set" / "other.csv").write_text("a\n")
    monkeypatch.setenv("SIMREC_DATA", str(tmp_path / "d"))
    sneaky = replace(_data_study(("set/other.csv",)), data_files=lambda config: ["set/ratings.csv"])
    with pytest.raises(datafiles.UndeclaredDataError, match="'set/other.csv', which its data_files do not list"):
        runner.run(sneaky, ToyConfig(draws=1), out=tmp_path / "out2", progress=False)


def test_the_manifest_names_the_head_commit_without_a_dirty_suffix(tmp_path):
    runner.run(TOY, ToyConfig(draws=1), out=tmp_path / "out", progress=False)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["git_commit"] is None or not manifest["git_commit"].endswith("-dirty")
    assert f"code version `{manifest['code_version']}`" in (tmp_path / "out" / "README.md").read_text()


def test_report_fields_leave_the_cache_address_so_grid_points_are_shared(tmp_path):
    grid = replace(TOY, report_fields=("rates",))                   # rates only choose cells
    cache = tmp_path / "cache"
    first = runner.run(grid, ToyConfig(rates=(0.1, 0.5)), seed=0, out=tmp_path / "a", cache_dir=cache,
                       progress=False)
    wider = runner.run(grid, ToyConfig(rates=(0.1, 0.5, 1.0)), seed=0, out=tmp_path / "b",
                       cache_dir=cache, progress=False)
    assert (first.cells_computed, wider.cells_computed, wider.cells_cached) == (6, 3, 6)
    other = runner.run(grid, ToyConfig(rates=(1.0,), inner=Inner(scale=2.0)), seed=0, out=tmp_path / "c",
                       cache_dir=cache, progress=False)
    assert other.cells_computed == 3                               # any other field still counts
    with pytest.raises(ValueError, match="report field 'inner.nope' is not a field"):
        runner.run(replace(TOY, report_fields=("inner.nope",)), ToyConfig(), seed=0,
                   out=tmp_path / "d", progress=False)


# ---- the code version: the closure of imported modules --------------------------------------

def _package(tmp_path, monkeypatch, files: dict[str, str]):
    """A throw-away package ``toypkg`` on sys.path with the given modules."""
    root = tmp_path / "src" / "toypkg"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    for name, text in files.items():
        (root / f"{name}.py").write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    for name in [m for m in sys.modules if m.split(".")[0] == "toypkg"]:
        monkeypatch.delitem(sys.modules, name)
    return root


STUDY_MODULE = """
    from dataclasses import dataclass
    from simrec.runner import Report, Study
    from toypkg import other_study

    @dataclass(frozen=True)
    class Config:
        n: int = 3

    def cells(config):
        return [{"i": i} for i in range(3)]

    def compute(key, config, cell, shared):
        return [{"i": cell["i"], "value": other_study.value(cell["i"])}]

    def report(config, records):
        return Report(summary="v1")

    STUDY = Study("closure", "d", {"default": Config()}, cells, compute, report,
                  columns={"i": int, "value": float})
"""


def test_editing_a_helper_reached_only_through_another_study_recomputes_the_cells(tmp_path, monkeypatch):
    root = _package(tmp_path, monkeypatch, {
        "study": STUDY_MODULE,
        "other_study": "from toypkg.helpers import scale\n\ndef value(i):\n    return scale(i)\n",
        "helpers": "def scale(i):\n    return 1.0 * i\n",
        "unrelated": "X = 1\n",
    })
    import importlib
    study = importlib.import_module("toypkg.study").STUDY
    modules = runner.module_closure("toypkg.study", ("toypkg", "simrec"))
    assert {"toypkg.study", "toypkg.other_study", "toypkg.helpers", "toypkg"} <= set(modules)
    assert "toypkg.unrelated" not in modules and "simrec.runner" not in modules
    out, cache = tmp_path / "out", tmp_path / "cache"
    assert runner.run(study, study.presets['default'], out=out, cache_dir=cache, progress=False).cells_computed == 3
    assert runner.run(study, study.presets['default'], out=out, cache_dir=cache, progress=False).cells_computed == 0
    (root / "unrelated.py").write_text("X = 2\n")
    assert runner.run(study, study.presets['default'], out=out, cache_dir=cache, progress=False).cells_computed == 0
    (root / "helpers.py").write_text("def scale(i):\n    return 2.0 * i   # changed\n")
    assert runner.run(study, study.presets['default'], out=out, cache_dir=cache, progress=False).cells_computed == 3


def test_the_closure_follows_an_import_added_after_a_first_reading(tmp_path, monkeypatch):
    """A module's imports are parsed once per process and file state: an edit that adds an import
    (a new size and modification time) brings the imported module into the closure and the version."""
    root = _package(tmp_path, monkeypatch, {"study": STUDY_MODULE, "other_study": "def value(i):\n    return i\n",
                                            "helpers": "X = 1\n"})
    import importlib
    study = importlib.import_module("toypkg.study").STUDY
    before = runner.code_version(study)
    assert "toypkg.helpers" not in runner.module_closure("toypkg.study", ("toypkg", "simrec"))
    (root / "other_study.py").write_text("import toypkg.helpers\n\n\ndef value(i):\n    return i\n")
    assert "toypkg.helpers" in runner.module_closure("toypkg.study", ("toypkg", "simrec"))
    after = runner.code_version(study)
    (root / "helpers.py").write_text("X = 2\n")
    assert len({before, after, runner.code_version(study)}) == 3


def test_editing_only_the_report_function_keeps_the_cache(tmp_path, monkeypatch):
    root = _package(tmp_path, monkeypatch, {"study": STUDY_MODULE, "other_study": "def value(i):\n    return i\n"})
    import importlib
    study = importlib.import_module("toypkg.study").STUDY
    before = runner.code_version(study)
    text = (root / "study.py").read_text()
    (root / "study.py").write_text(text.replace('summary="v1"', 'summary="v2"'))
    assert runner.code_version(study) == before
    (root / "study.py").write_text(text.replace("range(3)", "range(4)"))
    assert runner.code_version(study) != before


PACKAGE_STUDY = {
    "__init__": """
        from dataclasses import dataclass
        from simrec.runner import Study
        from toypkg.pstudy.compute import cells, compute
        from toypkg.pstudy.report import report

        @dataclass(frozen=True)
        class Config:
            n: int = 3

        STUDY = Study("pstudy", "d", {"default": Config()}, cells, compute, report,
                      columns={"i": int, "value": float})
    """,
    "compute": """
        def cells(config):
            return [{"i": i} for i in range(config.n)]

        def compute(key, config, cell, shared):
            return [{"i": cell["i"], "value": float(cell["i"])}]
    """,
    "report": """
        from simrec.runner import Report
        from toypkg.pstudy.prose import summary

        def report(config, records):
            return Report(summary=summary(records))
    """,
    "prose": """
        def summary(records):
            return "v1"
    """,
}


def test_a_report_only_edit_of_a_study_package_changes_no_cell_address(tmp_path, monkeypatch):
    root = _package(tmp_path, monkeypatch, {})
    (root / "pstudy").mkdir()
    for name, text in PACKAGE_STUDY.items():
        (root / "pstudy" / f"{name}.py").write_text(textwrap.dedent(text))
    import importlib
    study = importlib.import_module("toypkg.pstudy").STUDY
    assert runner.report_module(study) == "toypkg.pstudy.report"
    modules = runner.module_closure(study.module, ("toypkg", "simrec"), [runner.report_module(study)])
    assert {"toypkg.pstudy.compute", "toypkg.pstudy"} <= set(modules)
    assert not {"toypkg.pstudy.report", "toypkg.pstudy.prose"} & set(modules)
    out, cache = tmp_path / "out", tmp_path / "cache"
    assert runner.run(study, study.presets["default"], out=out, cache_dir=cache, progress=False).cells_computed == 3
    for name, old, new in (("report", "Report(summary=", "Report(float_format='.3g', summary="),
                           ("prose", '"v1"', '"v2"')):
        path = root / "pstudy" / f"{name}.py"
        path.write_text(path.read_text().replace(old, new))
        assert runner.run(study, study.presets["default"], out=out, cache_dir=cache, progress=False).cells_computed == 0
    path = root / "pstudy" / "compute.py"
    path.write_text(path.read_text().replace("float(cell", "2.0 * float(cell"))
    assert runner.run(study, study.presets["default"], out=out, cache_dir=cache, progress=False).cells_computed == 3


def test_claims_become_a_table_and_a_readme_section(tmp_path):
    from simrec.reporting import Claim
    claims = [Claim("Lim et al. RecSys'15, Thm 1", "ADG is unbiased under SRS", "", 1.001, "reproduced", 0.002,
                    "table_srs")]
    study = replace(TOY, report=lambda config, records: Report(summary="s", claims=claims))
    runner.run(study, ToyConfig(draws=1), out=tmp_path / "out", progress=False)
    table = pd.read_csv(tmp_path / "out" / "table_claims.csv")
    assert list(table.columns) == ["source", "claim", "source's number", "ours", "SE", "verdict", "evidence"]
    assert table.iloc[0].verdict == "reproduced" and table.iloc[0].ours == 1.0
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "## Claims" in readme and "| Lim et al. RecSys'15, Thm 1 | ADG is unbiased under SRS |  | 1 | 0.002 |" in readme


# ---- the output folder: one run, whole ------------------------------------------------------

def test_a_run_killed_during_its_report_leaves_the_previous_run_whole(tmp_path):
    out = tmp_path / "out"
    runner.run(TOY, ToyConfig(draws=3), out=out, progress=False)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def dying_report(config, records):
        toy_report(config, records)
        raise KeyboardInterrupt("killed while writing the report")

    with pytest.raises(KeyboardInterrupt):
        runner.run(replace(TOY, report=dying_report), ToyConfig(draws=1), out=out, progress=False)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert json.loads((out / "manifest.json").read_text())["config"]["draws"] == 3


def test_a_rerun_removes_files_the_new_run_does_not_write(tmp_path):
    out = tmp_path / "out"
    runner.run(TOY, ToyConfig(), out=out, progress=False)
    (out / "table_stale.csv").write_text("old")
    runner.run(TOY, ToyConfig(), out=out, progress=False)
    assert not (out / "table_stale.csv").exists()


def test_a_second_run_into_a_locked_folder_refuses_before_computing(tmp_path):
    with runner.OutputFolder(tmp_path / "out", "first run"):
        with pytest.raises(OutputError, match="another simrec run .* is writing to"):
            runner.run(TOY, ToyConfig(), out=tmp_path / "out", progress=False)
    assert CALLS["n"] == 0 and CALLS["setup"] == 0
    runner.run(TOY, ToyConfig(draws=1), out=tmp_path / "out", progress=False)     # lock released
    assert not (tmp_path / ".out.lock").exists()                                 # and removed


@pytest.mark.parametrize("make, message", [
    (lambda p: p.write_text("x"), "is a file, not a folder"),
    (lambda p: (p.mkdir(), (p / "notes.txt").write_text("mine")), "no simrec run wrote"),
])
def test_unusable_output_folders_fail_before_the_first_cell(tmp_path, make, message):
    make(tmp_path / "out")
    with pytest.raises(OutputError, match=message):
        runner.run(TOY, ToyConfig(), out=tmp_path / "out", progress=False)
    assert CALLS["n"] == 0 and CALLS["setup"] == 0


def test_an_output_folder_below_a_file_is_a_one_line_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="cannot create the output folder's parent"):
        runner.run(TOY, ToyConfig(), out=tmp_path / "file" / "sub" / "out", progress=False)


KILLED_STUDY = """
    import os, time
    from dataclasses import dataclass
    from pathlib import Path
    from simrec.runner import Report, Study

    @dataclass(frozen=True)
    class Config:
        n: int = 3

    def cells(config):
        return [{"i": i} for i in range(3)]

    def compute(key, config, cell, shared):
        if cell["i"] == 1 and "SIGNAL_FILE" in os.environ:           # only in the killed child
            Path(os.environ["SIGNAL_FILE"]).write_text("ready")
            time.sleep(60)
        return [{"i": cell["i"]}]

    def report(config, records):
        return Report()

    STUDY = Study("killed", "d", {"default": Config()}, cells, compute, report, columns={"i": int})
"""


def test_a_killed_first_run_leaves_only_a_folder_marked_incomplete(tmp_path, monkeypatch):
    _package(tmp_path, monkeypatch, {"killed": KILLED_STUDY})
    signal_file, out = tmp_path / "ready", tmp_path / "results" / "killed"
    code = ("import toypkg.killed as m; from simrec import runner; "
            f"runner.run(m.STUDY, m.Config(), out={str(out)!r}, progress=False)")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "src"), "SIGNAL_FILE": str(signal_file)}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        deadline = time.monotonic() + 120
        while not signal_file.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the run never reached cell 1"
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        proc.kill()
    assert not out.exists()
    (staging,) = out.parent.glob(".killed.incomplete-*")
    assert "unfinished simrec run" in (staging / output.INCOMPLETE_MARKER).read_text()
    assert len(list((out.parent / ".simrec-cache" / "killed").glob("*.json"))) == 1    # cell 0 kept
    import toypkg.killed as killed
    summary = runner.run(killed.STUDY, killed.Config(), out=out, progress=False)
    assert (summary.cells_computed, summary.cells_cached) == (2, 1)
    assert not list(out.parent.glob(".killed.incomplete-*")) and (out / "manifest.json").exists()


def test_config_help_falls_back_to_the_class_docstring():
    @dataclass(frozen=True)
    class Documented:
        """A config.

        users, items: catalogue sizes.
        """
        users: int = 3
        items: int = 4
        rate: float = 0.5     # observation rate

    rows = {key: meaning for key, _, _, meaning in runner.config_help(Documented())}
    assert rows == {"users": "catalogue sizes.", "items": "catalogue sizes.", "rate": "observation rate"}


def _parse_pair(text: str) -> tuple[int, int]:
    left, sep, right = text.partition(":")
    if not sep:
        raise ValueError(f"expected A:B, got {text!r}")
    return int(left), int(right)


def test_annotated_fields_parse_with_their_own_parser_and_show_short_type_names():
    from typing import Annotated

    @dataclass(frozen=True)
    class WithParser:
        pairs: tuple[Annotated[tuple, _parse_pair], ...] = ((1, 2),)     # pairs A:B
        kind: Literal["a", "b"] = "a"
        scale: float | None = None

    config = runner.with_overrides(WithParser(), {"pairs": "3:4,5:6"})
    assert config.pairs == ((3, 4), (5, 6))
    with pytest.raises(ConfigError, match="config key 'pairs': expected A:B, got 'x'"):
        runner.with_overrides(WithParser(), {"pairs": "x"})
    types = {key: tp for key, tp, _, _ in runner.config_help(WithParser())}
    assert types == {"pairs": "tuple[tuple, ...]", "kind": "one of 'a', 'b'", "scale": "float | None"}


def test_a_reports_global_plot_style_does_not_leak_into_the_next_study(tmp_path):
    import matplotlib

    def styled_report(config, records):
        import seaborn as sns
        sns.set_theme(style="darkgrid", font_scale=2)
        return toy_report(config, records)

    runner.run(TOY, ToyConfig(draws=1), out=tmp_path / "alone", progress=False)
    before = {k: v for k, v in matplotlib.rcParams.items() if k != "backend"}
    runner.run(replace(TOY, report=styled_report), ToyConfig(draws=1), out=tmp_path / "styled", progress=False)
    assert {k: v for k, v in matplotlib.rcParams.items() if k != "backend"} == before
    runner.run(TOY, ToyConfig(draws=1), out=tmp_path / "after", progress=False)
    assert (tmp_path / "alone" / "fig_toy.png").read_bytes() == (tmp_path / "after" / "fig_toy.png").read_bytes()


def test_fitted_models_are_shared_across_studies_through_the_cache(tmp_path, monkeypatch):
    import scipy.sparse as sp

    from simrec import models
    from simrec.models import tuning
    fits = []
    real_fit = tuning.fit
    monkeypatch.setattr(tuning, "fit", lambda *a, **k: fits.append(1) or real_fit(*a, **k))
    positives = sp.csr_matrix(np.eye(6, dtype=bool))

    def compute(key, config, cell, shared):
        model = models.fitted(None, models.PopularitySpec(), positives)
        return [{"rate": cell["rate"], "draw": cell["draw"], "i": 0, "value": float(np.asarray(models.score(model, np.arange(2)))[0, 0])}]
    first = replace(TOY, name="first", compute=compute, setup=None)
    second = replace(first, name="second")
    cache = tmp_path / "cache"
    runner.run(first, ToyConfig(draws=1), out=tmp_path / "a", cache_dir=cache, progress=False)
    runner.run(second, ToyConfig(draws=1), out=tmp_path / "b", cache_dir=cache, progress=False)
    assert len(fits) == 1 and len(list((cache / "models").glob("PopularitySpec-*.pkl"))) == 1
