"""simrec.datafiles: where studies find real data: --data-dir / SIMREC_DATA, else ../shared/data of the checkout."""
import argparse
import json
import os

import pytest

from simrec import cli
from simrec import datafiles as _data


def test_the_environment_variable_wins_and_missing_files_warn_in_one_line(tmp_path, monkeypatch):
    (tmp_path / "ml-latest-small").mkdir()
    (tmp_path / "ml-latest-small" / "ratings.csv").write_text("userId,movieId,rating,timestamp\n")
    monkeypatch.setenv(_data.DATA_ENV, str(tmp_path))
    assert _data.data_root() == tmp_path
    assert _data.data_file("ml-latest-small/ratings.csv") == tmp_path / "ml-latest-small" / "ratings.csv"
    with pytest.warns(_data.MissingDataWarning, match="coat/train.ascii not found.*--data-dir"):
        assert _data.data_file("coat/train.ascii") is None
    assert str(tmp_path / "coat" / "train.ascii") in _data.skipped_note("coat/train.ascii")


def test_the_default_is_shared_data_beside_a_checkout(tmp_path, monkeypatch):
    monkeypatch.delenv(_data.DATA_ENV, raising=False)
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "pyproject.toml").write_text("")
    (tmp_path / "shared" / "data").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "repo")
    root = _data.data_root()
    assert root.name == "data" and root.parent.name == "shared"      # the package's checkout, or the cwd's


def test_data_dir_flag_sets_the_environment_for_the_run(tmp_path, monkeypatch):
    monkeypatch.delenv(_data.DATA_ENV, raising=False)          # restored after the test
    cli._set_data_dir(argparse.Namespace(data_dir=str(tmp_path)))
    assert os.environ[_data.DATA_ENV] == str(tmp_path.absolute())
    assert _data.data_root() == tmp_path.absolute()


def test_digests_are_computed_once_per_path_size_and_modification_time(tmp_path, monkeypatch):
    import hashlib
    path = tmp_path / "ratings.csv"
    path.write_bytes(b"1,2,3\n")
    store = tmp_path / "digests.json"
    assert _data.file_digest(path, store) == hashlib.sha256(b"1,2,3\n").hexdigest()
    assert json.loads(store.read_text())[str(path)]["sha256"] == hashlib.sha256(b"1,2,3\n").hexdigest()
    stat = path.stat()
    path.write_bytes(b"9,9,9\n")                        # same size; restore the modification time
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    monkeypatch.setattr(_data, "_digests", {})          # a new process: only the store remembers
    assert _data.file_digest(path, store) == hashlib.sha256(b"1,2,3\n").hexdigest()
    path.write_bytes(b"9,9,9,9\n")                      # a new size: hashed again
    assert _data.file_digest(path, store) == hashlib.sha256(b"9,9,9,9\n").hexdigest()


def test_describe_lists_present_and_absent_files_once(tmp_path, monkeypatch):
    monkeypatch.setenv(_data.DATA_ENV, str(tmp_path))
    (tmp_path / "a.csv").write_text("x\n")
    found = _data.describe(["a.csv", "", "b.csv", "a.csv"])
    assert [(f.file, f.bytes, f.present) for f in found] == [("a.csv", 2, True), ("b.csv", None, False)]
    with pytest.raises(_data.MissingDataError, match="study 'toy': 1 data file.*b.csv.*--allow-missing-data"):
        _data.require(found, "toy")
    with _data.declared(["a.csv"]):
        assert _data.data_file("a.csv") == tmp_path / "a.csv"
        with pytest.raises(_data.UndeclaredDataError, match="'b.csv'"):
            _data.data_file("b.csv")
    assert _data.data_file("a.csv") == tmp_path / "a.csv"          # outside a run: any file
