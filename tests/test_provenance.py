"""simrec.provenance: committed folders checked against code, preset and data; folders compared."""
import json
from dataclasses import replace

import pytest

from simrec import provenance, runner
from tests.test_runner import TOY, ToyConfig, _data_study


def _rewrite(folder, **fields):
    path = folder / "manifest.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


@pytest.fixture
def data(tmp_path, monkeypatch):
    root = tmp_path / "data"
    (root / "set").mkdir(parents=True)
    (root / "set" / "ratings.csv").write_text("a\nb\n")
    monkeypatch.setenv("SIMREC_DATA", str(root))
    return root


def test_a_folder_is_fresh_until_its_code_config_or_data_changes(tmp_path, data):
    study = _data_study()
    out = tmp_path / "results" / "toy"
    runner.run(study, study.presets["smoke"], out=out, preset="smoke", progress=False)
    studies = {"toy": lambda: study}
    assert provenance.check_folder(out, studies).status == provenance.FRESH

    (data / "set" / "ratings.csv").write_text("a\nb\nc\n")
    status = provenance.check_folder(out, studies)
    assert status.status == provenance.STALE and "data file set/ratings.csv changed" in status.reasons[0]
    assert status.command == f"simrec run toy --preset smoke --out {out}"
    (data / "set" / "ratings.csv").write_text("a\nb\n")

    edited = replace(study, presets={**study.presets, "smoke": ToyConfig(draws=2)})
    status = provenance.check_folder(out, {"toy": lambda: edited})
    assert status.status == provenance.STALE and status.reasons == ("config differs from preset 'smoke'",)

    other_code = replace(study, compute=runner.Study.__init__)       # another module: another code version
    assert "code version" in provenance.check_folder(out, {"toy": lambda: other_code}).reasons[0]

    more_data = replace(study, data_files=lambda config: ["set/ratings.csv", "set/more.csv"])
    status = provenance.check_folder(out, {"toy": lambda: more_data})
    assert status.reasons == ("data file set/more.csv is read now but was not then",)

    (data / "set" / "ratings.csv").unlink()
    status = provenance.check_folder(out, studies)
    assert status.status == provenance.UNCHECKED and "data absent here: set/ratings.csv" in status.reasons[0]


def test_foreign_folders_and_package_versions_are_reported(tmp_path):
    out = tmp_path / "toy"
    runner.run(TOY, TOY.presets["smoke"], out=out, preset="smoke", progress=False)
    assert provenance.check_folder(out, {}).status == provenance.FOREIGN
    assert provenance.check_folder(tmp_path / "nothing", {"toy": lambda: TOY}).status == provenance.FOREIGN
    _rewrite(out, versions={**json.loads((out / "manifest.json").read_text())["versions"], "numpy": "0.0.1"})
    status = provenance.check_folder(out, {"toy": lambda: TOY})
    assert status.status == provenance.FRESH and status.packages[0].startswith("numpy 0.0.1 -> ")
    assert "[packages differ: numpy 0.0.1 ->" in status.line()
    _rewrite(out, code_version=None)
    assert provenance.check_folder(out, {"toy": lambda: TOY}).reasons == ("the manifest records no code version",)


def test_benchmark_folders_are_checked_by_the_benchmark_modules_version(tmp_path):
    (tmp_path / "scale").mkdir()
    version = runner.module_version("simrec_studies.bench_metrics")
    (tmp_path / "scale" / "manifest.json").write_text(json.dumps(
        {"study": "scale", "benchmark": "scale", "preset": "default", "code_version": version}))
    benches = {"scale": "simrec_studies.bench_metrics"}
    status = provenance.check_folder(tmp_path / "scale", {}, benches)
    assert status.status == provenance.FRESH and status.benchmark
    _rewrite(tmp_path / "scale", code_version="0" * 16)
    status = provenance.check_folder(tmp_path / "scale", {}, benches)
    assert status.status == provenance.STALE and status.command == f"simrec bench scale --out {tmp_path / 'scale'}"


def test_compare_folders_names_what_differs(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for folder in (a, b):
        folder.mkdir()
        (folder / "table_x.csv").write_text("1\n")
        (folder / "manifest.json").write_text(json.dumps({"wall": str(folder)}))
    (a / "table_y.csv").write_text("1\n")
    (b / "table_y.csv").write_text("2\n")
    (a / "fig.png").write_bytes(b"png")
    comparison = provenance.compare_folders(a, b)
    assert comparison.identical == ("table_x.csv",) and comparison.different == ("table_y.csv",)
    assert comparison.only_new == ("fig.png",) and not comparison.same
    assert comparison.line(b).startswith(f"1 of 2 tables and 1 of 3 files identical to the committed results in {b}")
    (a / "fig.png").unlink()
    (a / "table_y.csv").write_text("2\n")
    assert provenance.compare_folders(a, b).same


def test_a_benchmark_folder_from_before_versioned_manifests_is_stale_not_foreign(tmp_path):
    (tmp_path / "scale").mkdir()
    (tmp_path / "scale" / "manifest.json").write_text(json.dumps({"study": "scale", "preset": "default"}))
    status = provenance.check_folder(tmp_path / "scale", {}, {"scale": "simrec_studies.bench_metrics"})
    assert status.status == provenance.STALE and status.benchmark
    assert "before its manifests recorded a code version" in status.line()
    assert provenance.check_folder(tmp_path / "scale", {}, {}).status == provenance.FOREIGN
