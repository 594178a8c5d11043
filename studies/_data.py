"""Where the studies find real data: `../shared/data` beside the checkout (see the README)."""
from pathlib import Path

DATA_ROOT = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def real_data_file(relative: str) -> Path | None:
    """The file ``relative`` below `DATA_ROOT`, or None when disabled (``""``) or absent."""
    if not relative:
        return None
    path = DATA_ROOT / relative
    return path if path.is_file() else None


def skipped_note(relative: str) -> str:
    """A README line saying why the real-data part of a study did not run."""
    if not relative:
        return "- real data disabled (ratings_file empty)"
    return f"- ml-latest-small skipped: `{DATA_ROOT / relative}` not found"
