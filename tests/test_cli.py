"""CLI: discovery, running, sweeping, default output folders, and one-line errors (exit 2)."""
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from importlib import metadata

import pytest

from simrec import cli
from tests.test_runner import CALLS, TOY

OWN_STUDIES = {"correlation", "sensitivity", "unbiasedness", "counterexample", "opt_adg",
               "valid_vs_test", "disagreement", "protocols", "fold_in", "coat", "regimes", "assumptions",
               "position_bias", "open_bandit"}


def _entry(name: str, value: str, group: str) -> metadata.EntryPoint:
    return metadata.EntryPoint(name=name, value=value, group=group)


@pytest.fixture
def toy_registry(monkeypatch):
    """Only the toy study (and a twin with a report field) registered; benchmarks unchanged."""
    original = cli.entry_points
    grid = dataclasses.replace(TOY, name="grid", report_fields=("rates",))   # rates only choose cells
    monkeypatch.setattr(sys.modules[__name__], "GRID", grid, raising=False)

    def entry_points(group):
        if group == cli.STUDY_GROUP:
            return {"toy": _entry("toy", "tests.test_runner:TOY", group),
                    "grid": _entry("grid", f"{__name__}:GRID", group)}
        return original(group)

    monkeypatch.setattr(cli, "entry_points", entry_points)
    CALLS.update(n=0, setup=0, fail_after=None)


def test_studies_are_found_through_entry_points_and_no_generic_studies_package_is_installed():
    assert OWN_STUDIES <= set(cli.studies())
    assert {"metrics", "feed", "slate", "opt_adg"} <= set(cli.entry_points(cli.BENCH_GROUP))
    proc = subprocess.run([sys.executable, "-c", "import studies"], capture_output=True, text=True, cwd="/")
    assert "No module named 'studies'" in proc.stderr       # the library never imports them: tests/test_imports.py


def test_list_names_every_registered_study(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    for name in OWN_STUDIES:
        assert name in out


def test_bare_command_prints_usage_and_commands(capsys):
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    for command in ("list", "show", "run", "sweep", "bench"):
        assert command in out


def test_version_and_python_dash_m():
    proc = subprocess.run([sys.executable, "-m", "simrec", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("simrec ") and metadata.version("simrec") in proc.stdout


def test_show_lists_presets_expected_times_and_every_config_key(toy_registry, capsys):
    assert cli.main(["show", "toy"]) == 0
    out = capsys.readouterr().out
    assert "smoke    ~1 s" in out and "default  ~2 s" in out
    assert "inner.scale" in out and "multiplies every value" in out and "draws per rate" in out
    assert cli.main(["run", "toy", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--preset" in out and "inner.scale" in out


def test_every_own_study_documents_every_config_key():
    for name in sorted(OWN_STUDIES):
        study = cli.load_study(name)
        assert set(study.presets) >= {"smoke", "default"} and study.expected_seconds.get("default")
        undocumented = [key for key, _, _, meaning in cli.config_help(study.preset("default")) if not meaning]
        assert not undocumented, f"{name}: no meaning for {undocumented}"


def test_benchmark_options_are_reachable_with_help(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["bench", "metrics", "--help"])
    assert stop.value.code == 0
    assert "--recpack-python" in capsys.readouterr().out                # the benchmark's own option
    assert cli.main(["bench"]) == 0
    assert "metrics" in capsys.readouterr().out


def test_run_with_preset_seed_and_set(toy_registry, tmp_path, capsys):
    code = cli.main(["run", "toy", "--preset", "smoke", "--seed", "4", "--out", str(tmp_path / "o"),
                     "--set", "inner.scale=2", "--quiet"])
    assert code == 0
    assert (tmp_path / "o" / "table_toy.csv").exists() and (tmp_path / "o" / "manifest.json").exists()
    assert "3 cells computed" in capsys.readouterr().out


def test_without_out_runs_never_write_results_and_publish_does(toy_registry, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "toy", "--preset", "smoke", "--quiet"]) == 0
    assert cli.main(["run", "toy", "--set", "inner.scale=3", "--quiet"]) == 0
    assert cli.main(["run", "toy", "--quiet"]) == 0
    assert not (tmp_path / "results").exists()
    assert (tmp_path / "runs" / "toy" / "smoke" / "manifest.json").exists()
    assert (tmp_path / "runs" / "toy" / "default" / "manifest.json").exists()
    (changed,) = [p for p in (tmp_path / "runs" / "toy").iterdir() if p.name.startswith("default-")]
    assert json.loads((changed / "manifest.json").read_text())["config"]["inner"]["scale"] == 3
    capsys.readouterr()
    assert cli.main(["run", "toy", "--publish", "--quiet"]) == 0           # the cells come from the cache
    assert "0 cells computed, 9 cached" in capsys.readouterr().out
    assert (tmp_path / "results" / "toy" / "manifest.json").exists()
    assert "| default | 0 |" in (tmp_path / "results" / "README.md").read_text()


def test_a_run_without_out_compares_itself_with_the_committed_results(toy_registry, tmp_path, monkeypatch,
                                                                       capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "toy", "--publish", "--quiet"]) == 0
    assert cli.main(["run", "toy", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "toy: 1 of 1 tables and 6 of 6 files identical to the committed results in results/toy" in out
    assert "--publish" not in out
    committed = tmp_path / "results" / "toy" / "table_toy.csv"
    committed.write_text(committed.read_text().replace("0.", "1.", 1))
    assert cli.main(["run", "toy", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "0 of 1 tables and 5 of 6 files identical" in out and "differ: table_toy.csv" in out
    assert "simrec run toy --publish" in out


def test_a_paper_run_is_published_beside_the_default_and_indexed(toy_registry, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "toy", "--publish", "--quiet"]) == 0
    assert cli.main(["run", "toy", "--preset", "smoke", "--publish", "--quiet"]) == 0
    assert cli.main(["run", "toy", "--preset", "smoke", "--out", "results/toy_other", "--quiet"]) == 0
    index = (tmp_path / "results" / "README.md").read_text()
    assert "| default | 0 |" in index and "| smoke | 0 |" in index and "toy_smoke/README.md" in index
    assert "toy_other/README.md" in index


@pytest.mark.parametrize("argv, message", [
    (["run", "toy", "--publish", "--out", "x"], "--publish writes into results/ by itself"),
    (["run", "toy", "--publish", "--seed", "2"], "--publish writes the committed results"),
    (["run", "toy", "--stale", "--set", "inner.scale=2"], "--stale writes the committed results"),
    (["sweep", "scale", "--study", "toy", "--values", "1", "--publish"], "unrecognised arguments: --publish"),
    (["run", "toy", "--peer-timeout", "0"], "--peer-timeout: expects a positive number of seconds"),
])
def test_publishing_flags_are_checked_before_any_work(toy_registry, tmp_path, monkeypatch, argv, message, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and CALLS["n"] == 0
    assert not (tmp_path / "results").exists()


def test_stale_regenerates_only_what_is_stale(toy_registry, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "all", "--stale", "--quiet"]) == 0              # nothing committed: both run
    assert (tmp_path / "results" / "toy").is_dir() and (tmp_path / "results" / "grid").is_dir()
    capsys.readouterr()
    assert cli.main(["results"]) == 0
    out = capsys.readouterr().out
    assert "fresh     results/grid" in out and "fresh     results/toy" in out and "2 folders: 2 fresh" in out
    manifest = tmp_path / "results" / "toy" / "manifest.json"
    recorded = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**recorded, "code_version": "0" * 16}))
    assert cli.main(["results"]) == 0 and cli.main(["results", "--strict"]) == 1
    out = capsys.readouterr().out
    assert "stale     results/toy: code version 0000000000000000 then" in out
    assert "(regenerate: simrec run toy --publish)" in out
    CALLS.update(n=0)
    assert cli.main(["run", "all", "--stale", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "grid: results/grid is fresh, not regenerated" in out and "toy: 0 cells computed, 9 cached" in out
    assert json.loads(manifest.read_text())["code_version"] == recorded["code_version"]


def test_out_onto_another_studys_folder_is_refused_unless_forced(toy_registry, tmp_path, capsys):
    assert cli.main(["run", "toy", "--preset", "smoke", "--out", str(tmp_path / "o"), "--quiet"]) == 0
    assert cli.main(["run", "grid", "--preset", "smoke", "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "holds a run of study 'toy', not 'grid'" in err and "--force" in err and len(err.splitlines()) == 1
    assert json.loads((tmp_path / "o" / "manifest.json").read_text())["study"] == "toy"
    assert cli.main(["run", "grid", "--preset", "smoke", "--out", str(tmp_path / "o"), "--quiet", "--force"]) == 0
    assert json.loads((tmp_path / "o" / "manifest.json").read_text())["study"] == "grid"
    assert not list(tmp_path.glob(".o.*"))                       # no lock or staging left beside it


def test_a_cache_folder_that_is_a_file_is_refused_before_any_cell(toy_registry, tmp_path, capsys):
    (tmp_path / ".simrec-cache").write_text("not a folder")
    assert cli.main(["run", "toy", "--preset", "smoke", "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "cache folder" in err and "is a file" in err and len(err.splitlines()) == 1
    assert CALLS["n"] == 0 and CALLS["setup"] == 0 and not (tmp_path / "o").exists()


def test_list_answers_without_importing_jax():
    code = "import sys; from simrec import cli; cli.main(['list']); print('JAX' if 'jax' in sys.modules else 'no jax')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("no jax"), proc.stderr
    for name in OWN_STUDIES:
        assert name in proc.stdout


def test_sweep_help_shows_the_sweeps_own_out_default(capsys):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["sweep", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "runs/STUDY/sweep-FIELD" in text and "results/STUDY" not in text


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
    (["run", "toy", "--set", "bogus=1"], "study 'toy': unknown config key 'bogus'; valid keys:"),
    (["run", "toy", "--set", "inner.days=abc"], "config key 'inner.days' expects int, got 'abc'"),
    (["run", "all", "--set", "draws=0"], "study 'toy': draws must be >= 1"),
    (["run", "toy", "--set", "draws"], "--set expects key=value"),
    (["run", "toy", "--seed", "x"], "--seed expects an integer in [0, 4294967295], got 'x'"),
    (["run", "toy", "--seed", "99999999999999999999"], "--seed expects an integer in"),
    (["run", "toy", "--seed", "-1"], "--seed expects an integer in"),
    (["run", "toy", "--data-dir", "/nonexistent/data"], "--data-dir /nonexistent/data is not a folder"),
    (["sweep", "nope", "--study", "toy", "--values", "1"], "sweep field 'nope' is unknown"),
    (["bench", "nosuch"], "unknown benchmark 'nosuch'"),
    (["frobnicate"], "invalid choice"),
    (["run", "toy", "--coordinator", "127.0.0.1:1234"], "missing --num-processes, --process-id"),
    (["run", "toy", "--coordinator", "node1", "--num-processes", "2", "--process-id", "0"], "HOST:PORT"),
    (["sweep", "scale", "--study", "toy", "--values", "1", "--coordinator", "n:1", "--num-processes", "2",
      "--process-id", "5"], "--process-id must be an integer in [0, 1]"),
    (["run", "toy", "--num-processes", "x"], "argument --num-processes: invalid int value"),
])
def test_errors_are_one_line_with_exit_status_2(toy_registry, argv, message, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert CALLS["n"] == 0


def test_output_problems_are_one_line_errors_before_any_cell(toy_registry, tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    for out, message in ((tmp_path / "file", "is a file, not a folder"),
                         (tmp_path / "file" / "sub", "cannot create the output folder's parent")):
        assert cli.main(["run", "toy", "--out", str(out), "--quiet"]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1
    assert CALLS["n"] == 0 and CALLS["setup"] == 0


def test_console_script_reports_errors_without_traceback():
    proc = subprocess.run([sys.executable, "-m", "simrec", "run", "nosuch"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.startswith("simrec: error: unknown study") and "Traceback" not in proc.stderr


def test_interrupt_message_says_what_is_cached(toy_registry, tmp_path, capsys):
    CALLS.update(fail_after=0)
    assert cli.main(["run", "toy", "--out", str(tmp_path / "a"), "--quiet"]) == 130
    assert "no cell had finished, so nothing is cached" in capsys.readouterr().err
    CALLS.update(n=0, fail_after=2)
    assert cli.main(["run", "toy", "--out", str(tmp_path / "b"), "--quiet"]) == 130
    assert "2 of 9 cells are cached; run the same command again to resume" in capsys.readouterr().err


def test_sweep_values_expand_an_ellipsis_and_reject_an_open_end():
    assert cli._expand_values("1,2,4,...,64,inf".split(",")) == ["1", "2", "4", "8", "16", "32", "64", "inf"]
    assert cli._expand_values("0.1,0.2,0.3,...,0.6".split(",")) == ["0.1", "0.2", "0.3", "0.4", "0.5", "0.6"]
    assert cli._expand_values(["1", "inf"]) == ["1", "inf"]
    assert cli._expand_values("1,2,4,...,inf".split(","), limit=16.0) == ["1", "2", "4", "8", "16", "inf"]
    for bad, message in (("1,2,4,...,inf", "finite end"), ("1,2,...,8", "at least three numbers"),
                         ("1,2,4,...,100", "does not reach 100"), ("1,3,4,...,10", "neither an arithmetic")):
        with pytest.raises(cli.UsageError, match=message):
            cli._expand_values(bad.split(","))


def test_sweep_of_a_report_field_computes_each_cell_once(toy_registry, tmp_path, capsys):
    code = cli.main(["sweep", "rates", "--study", "grid", "--values", "0.25,0.5,0.75,...,1,inf",
                     "--preset", "smoke", "--out", str(tmp_path), "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "rates=all: 5 computed, 0 cached" in printed                    # 0.25, 0.5, 0.75, 1, inf at once
    assert "rates=inf: 0 computed, 1 cached" in printed and CALLS["n"] == 5
    stacked = (tmp_path / "table_toy.csv").read_text().splitlines()
    assert stacked[0].startswith("rates,rate,") and len(stacked) == 1 + 5


def test_sigint_of_a_real_run_is_reported_truthfully(tmp_path):
    """Ctrl-C while the first cell is still running: the message must not claim cached cells."""
    # the child gets Python's own Ctrl-C handler: a test run before this one in the same worker may
    # have left SIGINT ignored, and an ignored disposition is inherited by subprocesses
    code = ("import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
            "import sys, time, dataclasses; from tests import test_runner as t; from simrec import cli\n"
            "slow = dataclasses.replace(t.TOY, compute=lambda *a: (open(sys.argv[1], 'w').write('x'), time.sleep(60)))\n"
            "cli.load_study = lambda name: slow\n"
            "sys.exit(cli.main(['run', 'toy', '--out', sys.argv[2], '--quiet']))")
    signal_file = tmp_path / "started"
    proc = subprocess.Popen([sys.executable, "-c", code, str(signal_file), str(tmp_path / "out")],
                            stderr=subprocess.PIPE, text=True, cwd=os.getcwd())
    deadline = time.monotonic() + 120
    while not signal_file.exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "no cell had finished, so nothing is cached" in err and "Traceback" not in err


def test_a_study_whose_data_is_missing_exits_2_unless_allowed(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    before = os.environ.get("SIMREC_DATA")
    argv = ["run", "coat", "--preset", "smoke", "--data-dir", str(empty), "--out", str(tmp_path / "o"), "--quiet"]
    assert cli.main(argv) == 2
    assert os.environ.get("SIMREC_DATA") == before           # --data-dir holds for that command only
    err = capsys.readouterr().err.strip()
    assert "study 'coat': 3 data file(s) not found below" in err and "--allow-missing-data" in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "o").exists()
    with pytest.warns(UserWarning, match="coat/train.ascii not found"):
        assert cli.main(argv + ["--allow-missing-data"]) == 0
    assert "`coat/train.ascii`: not found" in (tmp_path / "o" / "README.md").read_text()


def test_a_corrupt_ratings_file_read_in_a_studys_setup_is_one_line(tmp_path, capsys):
    (tmp_path / "ml-latest-small").mkdir()
    (tmp_path / "ml-latest-small" / "ratings.csv").write_text(
        "userId,movieId,rating,timestamp\n1,1,4.0,964982703\n1,3,4.0,964981247\n1,6,four,964982224\n")
    argv = ["run", "disagreement", "--preset", "smoke", "--set", "ratings_file=ml-latest-small/ratings.csv",
            "--data-dir", str(tmp_path), "--out", str(tmp_path / "o"), "--quiet"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "ratings.csv, line 4" in err and "four" in err and len(err.splitlines()) == 1 and "Traceback" not in err
