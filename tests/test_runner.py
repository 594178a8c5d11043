"""Runner: caching, resumption after a kill, byte-identical outputs, configs and overrides."""
from dataclasses import dataclass, field
from typing import Literal

import jax
import matplotlib
import numpy as np
import pandas as pd
import pytest

from simrec import runner
from simrec.runner import CellResult, ConfigError, Report, Study

matplotlib.use("Agg")


@dataclass(frozen=True)
class Inner:
    days: int = 3
    scale: float = 1.0


@dataclass(frozen=True)
class ToyConfig:
    rates: tuple[float, ...] = (0.1, 0.5, 1.0)
    draws: int = 3
    name: str = "toy"
    kind: Literal["a", "b"] = "a"
    flag: bool = False
    inner: Inner = field(default_factory=Inner)

    def __post_init__(self):
        if self.draws < 1:
            raise ValueError(f"draws must be >= 1, got {self.draws}")


CALLS = {"n": 0, "fail_after": None}


def toy_cells(config):
    return [{"rate": r, "draw": d} for r in config.rates for d in range(config.draws)]


def toy_compute(key, config, cell):
    CALLS["n"] += 1
    if CALLS["fail_after"] is not None and CALLS["n"] > CALLS["fail_after"]:
        raise KeyboardInterrupt("simulated kill")
    x = jax.random.uniform(runner.cell_key(key, cell), (5,))
    return {"value": float(cell["rate"] * x.mean() * config.inner.scale), "xs": x}


def toy_report(config, results):
    import matplotlib.pyplot as plt
    frame = pd.DataFrame([{**r.cell, "value": r.value["value"]} for r in results])
    table = frame.groupby("rate", as_index=False)["value"].mean()
    fig, ax = plt.subplots()
    ax.plot(table["rate"], table["value"])
    return Report(tables={"table_toy": table}, figures={"fig_toy": fig}, summary="A toy.")


TOY = Study("toy", "a toy study", {"smoke": ToyConfig(draws=1), "default": ToyConfig()},
            toy_cells, toy_compute, toy_report, source=__file__)


def _outputs(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
            if p.is_file() and p.name != "manifest.json"}


def test_run_writes_tables_figures_manifest_and_readme(tmp_path):
    CALLS.update(n=0, fail_after=None)
    summary = runner.run(TOY, ToyConfig(), seed=3, out=tmp_path / "out", preset="default",
                         progress=False)
    files = _outputs(tmp_path / "out")
    for name in ("table_toy.csv", "table_toy.md", "table_toy.tex", "fig_toy.png", "README.md"):
        assert name in files
    assert files["fig_toy.png"].startswith(b"\x89PNG")
    manifest = __import__("json").loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["seed"] == 3 and manifest["config"]["inner"]["days"] == 3
    assert manifest["cells"] == {"total": 9, "computed": 9, "cached": 0}
    assert {"python", "jax", "numpy"} <= set(manifest["versions"])
    assert "wall_time_s" in manifest and "git_commit" in manifest
    assert summary.cells_computed == 9


def test_kill_mid_sweep_then_resume_gives_identical_outputs_and_no_partial_files(tmp_path):
    CALLS.update(n=0, fail_after=None)
    runner.run(TOY, ToyConfig(), seed=0, out=tmp_path / "clean", progress=False)

    CALLS.update(n=0, fail_after=4)
    with pytest.raises(KeyboardInterrupt):
        runner.run(TOY, ToyConfig(), seed=0, out=tmp_path / "resumed", progress=False)
    cached = list((tmp_path / "resumed" / ".cache" / "toy").glob("*.json"))
    assert len(cached) == 4
    assert not list((tmp_path / "resumed").rglob("*.tmp"))
    assert not list((tmp_path / "resumed").glob("table*"))          # nothing half-written

    CALLS.update(n=0, fail_after=None)
    summary = runner.run(TOY, ToyConfig(), seed=0, out=tmp_path / "resumed", progress=False)
    assert (summary.cells_computed, summary.cells_cached) == (5, 4)
    assert CALLS["n"] == 5
    assert _outputs(tmp_path / "clean") == _outputs(tmp_path / "resumed")

    CALLS.update(n=0)
    again = runner.run(TOY, ToyConfig(), seed=0, out=tmp_path / "resumed", progress=False)
    assert again.cells_computed == 0 and CALLS["n"] == 0
    assert _outputs(tmp_path / "clean") == _outputs(tmp_path / "resumed")


def test_seed_and_config_change_the_cache_address(tmp_path):
    CALLS.update(n=0, fail_after=None)
    a = runner.run(TOY, ToyConfig(), seed=0, out=tmp_path / "a", progress=False)
    b = runner.run(TOY, ToyConfig(), seed=1, out=tmp_path / "a", progress=False)
    c = runner.run(TOY, ToyConfig(inner=Inner(scale=2.0)), seed=0, out=tmp_path / "a", progress=False)
    assert a.cells_computed == b.cells_computed == c.cells_computed == 9


def test_cell_keys_are_deterministic_and_independent_of_other_cells():
    root = jax.random.key(0)
    k1 = jax.random.key_data(runner.cell_key(root, {"rate": 0.1, "draw": 2}))
    k2 = jax.random.key_data(runner.cell_key(root, {"draw": 2, "rate": 0.1}))
    k3 = jax.random.key_data(runner.cell_key(root, {"rate": 0.1, "draw": 3}))
    assert runner.key_id(runner.shared_key(root, "world")) != runner.key_id(runner.shared_key(root, "x"))
    np.testing.assert_array_equal(k1, k2)
    assert not np.array_equal(k1, k3)


def test_overrides_parse_types_and_nested_fields():
    cfg = runner.with_overrides(ToyConfig(), {"rates": "0.2,0.4", "inner.days": "7", "flag": "true",
                                              "kind": "b", "inner.scale": "inf"})
    assert cfg.rates == (0.2, 0.4) and cfg.inner.days == 7 and cfg.flag is True and cfg.kind == "b"
    assert cfg.inner.scale == float("inf")


@pytest.mark.parametrize("overrides, message", [
    ({"nope": "1"}, "unknown config key 'nope'; valid keys: draws, flag, inner.days"),
    ({"inner.dayz": "1"}, "unknown config key 'inner.dayz'"),
    ({"draws": "many"}, "config key 'draws' expects int, got 'many'"),
    ({"flag": "maybe"}, "expects bool"),
    ({"kind": "c"}, "is not one of a, b"),
    ({"draws": "0"}, "draws must be >= 1"),
])
def test_bad_overrides_raise_config_errors(overrides, message):
    with pytest.raises(ConfigError, match=message):
        runner.with_overrides(ToyConfig(), overrides)


def test_unknown_preset_names_the_choices():
    with pytest.raises(ConfigError, match="choose one of: smoke, default"):
        TOY.preset("huge")


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


def test_cell_results_must_be_json_serialisable(tmp_path):
    bad = Study("bad", "d", {"default": ToyConfig(draws=1)}, toy_cells,
                lambda key, config, cell: {"obj": object()}, toy_report, source=__file__)
    with pytest.raises(TypeError):
        runner.run(bad, ToyConfig(draws=1), out=tmp_path, progress=False)
    assert not list(tmp_path.rglob("*.tmp"))


def test_to_json_converts_arrays_and_non_finite_values():
    out = runner.to_json({"a": np.arange(3), "b": jax.numpy.float32(1.5), "c": (np.inf, np.nan)})
    assert out["a"] == [0, 1, 2] and out["b"] == 1.5 and out["c"][0] == float("inf")
    assert isinstance(CellResult({"x": 1}, out).value, dict)


def test_results_index_lists_every_study_folder(tmp_path):
    CALLS.update(n=0, fail_after=None)
    runner.run(TOY, ToyConfig(draws=1), seed=0, out=tmp_path / "toy", preset="smoke", progress=False)
    index = runner.write_results_index(tmp_path).read_text()
    assert "| [toy](toy/README.md) | a toy study | smoke | 0 |" in index
    assert "[table_toy](toy/table_toy.md)" in index and "[fig_toy](toy/fig_toy.png)" in index


def test_editing_report_code_keeps_the_cache_but_editing_compute_code_does_not(tmp_path):
    module = tmp_path / "study_mod.py"
    body = ("def compute(key, config, cell):\n    return {'v': 1}\n\n"
            "def report(config, results):\n    return None\n")
    module.write_text(body)
    import importlib.util
    spec = importlib.util.spec_from_file_location("study_mod", module)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    study = Study("m", "d", {}, toy_cells, mod.compute, mod.report, source=str(module))
    before = runner.code_version(study)
    module.write_text(body.replace("return None", "return 'changed'"))
    assert runner.code_version(study) == before
    module.write_text(body.replace("{'v': 1}", "{'v': 2}"))
    assert runner.code_version(study) != before


def test_editing_a_dependency_changes_the_code_version(tmp_path):
    shared = tmp_path / "shared_mod.py"
    shared.write_text("SIZE = 1\n")
    study = Study("m", "d", {}, toy_cells, lambda key, config, cell: {}, lambda config, results: None,
                  dependencies=(str(shared),))
    before = runner.code_version(study)
    assert runner.code_version(study) == before
    shared.write_text("SIZE = 2\n")
    assert runner.code_version(study) != before


def test_report_fields_leave_the_cache_address_so_grid_points_are_shared(tmp_path):
    import dataclasses
    grid = dataclasses.replace(TOY, report_fields=("rates",))       # rates only choose cells
    CALLS.update(n=0, fail_after=None)
    first = runner.run(grid, ToyConfig(rates=(0.1, 0.5)), seed=0, out=tmp_path / "a", progress=False)
    wider = runner.run(grid, ToyConfig(rates=(0.1, 0.5, 1.0)), seed=0, out=tmp_path / "b",
                       cache_dir=tmp_path / "a" / ".cache", progress=False)
    assert (first.cells_computed, wider.cells_computed, wider.cells_cached) == (6, 3, 6)
    other = runner.run(grid, ToyConfig(rates=(1.0,), inner=Inner(scale=2.0)), seed=0, out=tmp_path / "c",
                       cache_dir=tmp_path / "a" / ".cache", progress=False)
    assert other.cells_computed == 3                               # any other field still counts
    with pytest.raises(ValueError, match="report field 'inner.nope' is not a field"):
        runner.run(dataclasses.replace(TOY, report_fields=("inner.nope",)), ToyConfig(), seed=0,
                   out=tmp_path / "d", progress=False)
