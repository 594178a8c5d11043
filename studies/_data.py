"""Where the studies find real data sets.

The folder is ``$SIMREC_DATA`` (set by ``simrec run --data-dir``) or, by default,
``../shared/data`` beside the checkout (`data_root`). A missing file disables the
real-data part of a study: the run says so in one warning line and in its README.
"""
import os
import warnings
from pathlib import Path

DATA_ENV = "SIMREC_DATA"


class MissingDataWarning(UserWarning):
    """A real data set was not found, so the part of a study that needs it is skipped."""


def data_root() -> Path:
    """The real-data folder: ``$SIMREC_DATA``, else ``../shared/data`` beside the checkout this
    package was installed from (editable install), else beside the current checkout (the working
    folder holding ``pyproject.toml``, for a regular install run from the repository)."""
    configured = os.environ.get(DATA_ENV)
    if configured:
        return Path(configured)
    for checkout in (Path(__file__).resolve().parents[1], Path.cwd()):
        if (checkout / "pyproject.toml").is_file() and (checkout.parent / "shared" / "data").is_dir():
            return checkout.parent / "shared" / "data"
    return Path(__file__).resolve().parents[1].parent / "shared" / "data"


def real_data_file(relative: str) -> Path | None:
    """The file ``relative`` below `data_root`, or None when disabled (``""``) or absent (with a
    one-line `MissingDataWarning` naming the path and how to point simrec at the data)."""
    if not relative:
        return None
    path = data_root() / relative
    if path.is_file():
        return path
    warnings.warn(f"{path} not found: the real-data part is skipped (set --data-dir or "
                  f"{DATA_ENV} to the folder that holds {relative.split('/')[0]}/)",
                  MissingDataWarning, stacklevel=2)
    return None


def skipped_note(relative: str) -> str:
    """A README line saying why the real-data part of a study did not run."""
    if not relative:
        return "- real data disabled (ratings_file empty)"
    return f"- {relative.split('/')[0]} skipped: `{data_root() / relative}` not found"
