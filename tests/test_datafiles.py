"""simrec.datafiles: where studies find real data: --data-dir / SIMREC_DATA, else ../shared/data of the checkout."""
import argparse
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
