"""CLI: listing, running, sweeping, and one-line errors with exit status 2."""
import subprocess
import sys

import pytest

import studies
from simrec import cli
from tests.test_runner import TOY, CALLS


@pytest.fixture
def toy_registry(monkeypatch):
    monkeypatch.setitem(studies.STUDIES, "toy", "tests.test_runner")
    original = studies.load_study
    monkeypatch.setattr(studies, "load_study", lambda name: TOY if name == "toy" else original(name))
    CALLS.update(n=0, fail_after=None)


def test_list_names_every_registered_study(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    for name in studies.STUDIES:
        assert name in out


def test_run_with_preset_seed_and_set(toy_registry, tmp_path, capsys):
    code = cli.main(["run", "toy", "--preset", "smoke", "--seed", "4", "--out", str(tmp_path),
                     "--set", "inner.scale=2", "--quiet"])
    assert code == 0
    assert (tmp_path / "table_toy.csv").exists() and (tmp_path / "manifest.json").exists()
    assert "3 cells computed" in capsys.readouterr().out


def test_sweep_writes_one_folder_per_value_and_a_stacked_table(toy_registry, tmp_path):
    code = cli.main(["sweep", "scale", "--study", "toy", "--values", "1,2,inf", "--preset", "smoke",
                     "--out", str(tmp_path), "--quiet"])
    assert code == 0
    for v in ("1", "2", "inf"):
        assert (tmp_path / f"inner.scale={v}" / "table_toy.csv").exists()
    stacked = (tmp_path / "table_toy.csv").read_text().splitlines()
    assert stacked[0].startswith("inner.scale,") and len(stacked) == 1 + 3 * 3


@pytest.mark.parametrize("argv, message", [
    (["run", "nosuch"], "unknown study 'nosuch'; choose one of:"),
    (["run", "toy", "--preset", "huge"], "unknown preset 'huge'"),
    (["run", "toy", "--set", "bogus=1"], "unknown config key 'bogus'; valid keys:"),
    (["run", "toy", "--set", "draws=lots"], "config key 'draws' expects int"),
    (["run", "toy", "--set", "draws"], "--set expects key=value"),
    (["run", "toy", "--seed", "x"], "invalid int value"),
    (["sweep", "nope", "--study", "toy", "--values", "1"], "sweep field 'nope' is unknown"),
    (["bench", "nosuch"], "unknown benchmark 'nosuch'"),
    (["frobnicate"], "invalid choice"),
])
def test_errors_are_one_line_with_exit_status_2(toy_registry, argv, message, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_console_script_reports_errors_without_traceback():
    proc = subprocess.run([sys.executable, "-m", "simrec.cli", "run", "nosuch"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.startswith("simrec: error: unknown study") and "Traceback" not in proc.stderr


def test_sweep_values_expand_an_ellipsis_and_reject_an_open_end():
    assert cli._expand_values("1,2,4,...,64,inf".split(",")) == ["1", "2", "4", "8", "16", "32", "64", "inf"]
    assert cli._expand_values("0.1,0.2,0.3,...,0.6".split(",")) == ["0.1", "0.2", "0.3", "0.4", "0.5", "0.6"]
    assert cli._expand_values(["1", "inf"]) == ["1", "inf"]
    assert cli._expand_values("1,2,4,...,inf".split(","), limit=16.0) == ["1", "2", "4", "8", "16", "inf"]
    for bad, message in (("1,2,4,...,inf", "finite end"), ("1,2,...,8", "at least three numbers"),
                         ("1,2,4,...,100", "does not reach 100"), ("1,3,4,...,10", "neither an arithmetic")):
        with pytest.raises(cli.UsageError, match=message):
            cli._expand_values(bad.split(","))


def test_sweep_of_a_report_field_computes_each_cell_once(toy_registry, tmp_path, monkeypatch, capsys):
    import dataclasses
    monkeypatch.setitem(studies.STUDIES, "grid", "tests.test_runner")
    grid = dataclasses.replace(TOY, name="grid", report_fields=("rates",))   # rates only choose cells
    original = studies.load_study
    monkeypatch.setattr(studies, "load_study", lambda name: grid if name == "grid" else original(name))
    code = cli.main(["sweep", "rates", "--study", "grid", "--values", "0.25,0.5,0.75,...,1,inf", "--preset", "smoke",
                     "--out", str(tmp_path), "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "rates=all: 5 computed, 0 cached" in printed                    # 0.25, 0.5, 0.75, 1, inf at once
    assert "rates=inf: 0 computed, 1 cached" in printed and CALLS["n"] == 5
    stacked = (tmp_path / "table_toy.csv").read_text().splitlines()
    assert stacked[0].startswith("rates,rate,") and len(stacked) == 1 + 5
