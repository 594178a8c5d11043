"""Writing a run's outputs: atomic files with the usual permissions, tables as CSV + Markdown +
LaTeX, figures as PNG, the staged-and-swapped output folder with its lock, the results index and
the claims page gathered from every study's claims table."""
from __future__ import annotations

import contextlib
import datetime
import io
import json
import math
import os
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["RESULTS", "RUNS", "OutputError", "OutputFolder", "INCOMPLETE_MARKER", "atomic_write_bytes",
           "atomic_write_text", "write_table", "write_figure", "write_results_index", "claims_page"]


#: the committed results (one folder per study and preset, indexed by results/README.md) and the
#: folder of every other run, both relative to the working folder
RESULTS, RUNS = Path("results"), Path("runs")


class OutputError(OSError):
    """The output folder cannot be used (a file, unwritable, locked by another run)."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same folder and an atomic rename; the
    file gets the usual permissions (0666 less the umask), not `mkstemp`'s 0600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path | str, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def _fmt(value, float_format: str) -> str:
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return "–"
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        return format(float(value), float_format)
    return str(value)


_TEX_ESCAPE = {"|": r"$|$", "&": r"\&", "%": r"\%", "_": r"\_", "#": r"\#", "$": r"\$", "∞": r"$\infty$",
               "†": r"$^\dagger$", "–": "--", "−": "-", "±": r"$\pm$", "≤": r"$\le$", "≥": r"$\ge$",
               "⁺": r"$^+$", "₀": r"$_0$", "τ": r"$\tau$", "ε": r"$\varepsilon$", "∖": r"$\setminus$",
               "×": r"$\times$", "Δ": r"$\Delta$"}


def _tex(text: str) -> str:
    # **bold** markers (Markdown) become \textbf{...}
    parts = text.split("**")
    out = []
    for i, part in enumerate(parts):
        esc = "".join(_TEX_ESCAPE.get(ch, ch) for ch in part)
        out.append(f"\\textbf{{{esc}}}" if i % 2 == 1 and len(parts) % 2 == 1 else esc)
    return "".join(out)


def write_table(out: Path, name: str, df, float_format: str = ".4g") -> list[str]:
    """Write a DataFrame as NAME.csv (full precision), NAME.md and NAME.tex (formatted)."""
    import pandas as pd
    out = Path(out)
    index = df.index.name is not None or not isinstance(df.index, pd.RangeIndex)
    frame = df.reset_index() if index else df
    buf = io.StringIO()
    frame.to_csv(buf, index=False, float_format="%.10g", lineterminator="\n")
    atomic_write_text(out / f"{name}.csv", buf.getvalue())

    from simrec.reporting import markdown_cell      # here: `simrec list` answers without JAX (stats)

    header = [str(c) for c in frame.columns]
    rows = [[_fmt(v, float_format) for v in row] for row in frame.itertuples(index=False)]
    md = ["| " + " | ".join(map(markdown_cell, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
    md += ["| " + " | ".join(map(markdown_cell, r)) + " |" for r in rows]
    atomic_write_text(out / f"{name}.md", "\n".join(md) + "\n")

    align = "l" + "r" * (len(header) - 1)
    tex = [r"\begin{tabular}{" + align + "}", r"\toprule",
           " & ".join(_tex(h) for h in header) + r" \\", r"\midrule"]
    tex += [" & ".join(_tex(c) for c in r) + r" \\" for r in rows]
    tex += [r"\bottomrule", r"\end{tabular}"]
    atomic_write_text(out / f"{name}.tex", "\n".join(tex) + "\n")
    return [f"{name}.csv", f"{name}.md", f"{name}.tex"]


def write_figure(out: Path, name: str, fig) -> str:
    import matplotlib.pyplot as plt
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    atomic_write_bytes(out / f"{name}.png", buf.getvalue())
    return f"{name}.png"


INCOMPLETE_MARKER = "INCOMPLETE-RUN.txt"


class OutputFolder:
    """Stage a run's files and swap the finished set into ``out`` as a whole.

    While running, files go to a hidden sibling ``.NAME.incomplete-PID/`` holding
    ``INCOMPLETE-RUN.txt``; `commit` renames the old folder away, the staged one into place and
    deletes the old one, so ``out`` only ever holds one finished run (files the new run does not
    write disappear). A lock (``.NAME.lock``, released by the OS when the process dies and removed
    when the run ends) makes a second run into the same folder refuse. A folder holding another
    study's run (its manifest names another ``study``) is refused unless ``force``. Every problem
    is an `OutputError` raised before any cell is computed.
    """

    def __init__(self, out: Path | str, description: str = "", *, study: str | None = None,
                 force: bool = False):
        self.out = Path(out).absolute()
        self.description = description
        self.study, self.force = study, force
        self.staging = self.out.parent / f".{self.out.name}.incomplete-{os.getpid()}"
        self.lock_path = self.out.parent / f".{self.out.name}.lock"
        self._lock = None

    def _check_owner(self) -> None:
        """Refuse to replace another study's finished run (unless ``force``)."""
        try:
            owner = json.loads((self.out / "manifest.json").read_text()).get("study")
        except (OSError, ValueError, AttributeError):
            return
        if self.study is not None and owner is not None and owner != self.study and not self.force:
            raise OutputError(f"--out {self.out} holds a run of study {owner!r}, not {self.study!r}; "
                              f"choose another --out, or pass --force to replace it")

    def _acquire(self):
        """The open, flock-ed lock file, or `OutputError` naming the run that holds it. A lock file
        removed by a finishing run between our open and our flock is opened again."""
        import fcntl
        while True:
            try:
                lock = open(self.lock_path, "a+")
            except OSError as err:
                raise OutputError(f"cannot lock {self.lock_path}: {err.strerror or err}") from None
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.seek(0)
                owner = lock.read().strip() or "another process"
                lock.close()
                raise OutputError(f"another simrec run ({owner}) is writing to {self.out}; wait for it "
                                  f"to finish or choose another --out") from None
            except OSError as err:
                lock.close()
                raise OutputError(f"cannot lock {self.lock_path}: {err.strerror or err}") from None
            try:
                same = os.stat(self.lock_path).st_ino == os.fstat(lock.fileno()).st_ino
            except FileNotFoundError:
                same = False
            if same:
                return lock
            lock.close()

    def __enter__(self) -> "OutputFolder":
        out = self.out
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise OutputError(f"cannot create the output folder's parent {out.parent}: "
                              f"{err.strerror or err}; choose another --out") from None
        if out.exists() and not out.is_dir():
            raise OutputError(f"--out {out} is a file, not a folder; choose another --out")
        if out.is_dir() and any(out.iterdir()) and not (out / "manifest.json").exists():
            raise OutputError(f"--out {out} is a non-empty folder that no simrec run wrote (no "
                              f"manifest.json); choose an empty or new folder")
        self._check_owner()
        if not os.access(out.parent, os.W_OK | os.X_OK):
            raise OutputError(f"cannot write to {out.parent}; choose another --out")
        self._lock = self._acquire()
        self._lock.seek(0)
        self._lock.truncate()
        self._lock.write(f"pid {os.getpid()}")
        self._lock.flush()
        for stale in out.parent.glob(f".{out.name}.incomplete-*"):   # killed runs (we hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        for stale in out.parent.glob(f".{out.name}.old-*"):
            shutil.rmtree(stale, ignore_errors=True)
        self.staging.mkdir()
        atomic_write_text(self.staging / INCOMPLETE_MARKER,
                          f"An unfinished simrec run ({self.description}, pid {os.getpid()}, started "
                          f"{datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}"
                          f"). Its files are not results; the finished run replaces this folder.\n")
        return self

    def commit(self) -> None:
        """Swap the staged files into place (the old folder, if any, is removed)."""
        (self.staging / INCOMPLETE_MARKER).unlink()
        old = self.out.parent / f".{self.out.name}.old-{os.getpid()}"
        if self.out.exists():
            os.rename(self.out, old)
        os.rename(self.staging, self.out)
        shutil.rmtree(old, ignore_errors=True)

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None and self.staging.exists():
            shutil.rmtree(self.staging, ignore_errors=True)
        if self._lock is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.lock_path)      # still holding the flock: no other run owns it
            self._lock.close()                 # releases the flock
            self._lock = None


def _wall_time(manifest: dict) -> str:
    """The run's wall time and, when cells came from the cache, what computing them took (the
    sum of the cells' own seconds, "of cell time, N cells at a time" when the executor had N
    workers: each cell's seconds then include the others' load, and their sum exceeds the wall time)."""
    text = f"{manifest['wall_time_s']:.0f} s"
    cells = manifest.get("cells", {})
    if cells.get("cached"):
        compute = cells.get("compute_s")
        workers = (manifest.get("executor") or {}).get("workers") or 1
        at_once = f" of cell time, {workers} cells at a time" if workers > 1 else ""
        text += (f" ({cells['cached']} of {cells['total']} cells cached; computing every cell took "
                 f"{compute:.0f} s{at_once})" if compute is not None else
                 f" ({cells['cached']} of {cells['total']} cells cached)")
    return text


def write_results_index(root: Path | str) -> Path:
    """(Re)write ``root/README.md``, one row per study folder below ``root`` that has a manifest,
    and ``root/claims.md`` (`claims_page`)."""
    root = Path(root)
    rows = []
    for manifest_path in sorted(root.glob("*/manifest.json")):
        manifest = json.loads(manifest_path.read_text())
        folder = manifest_path.parent.name
        readme = manifest_path.parent / "README.md"
        description = readme.read_text().split("\n")[2] if readme.exists() else ""
        tables = ", ".join(f"[{f[:-3]}]({folder}/{f})" for f in manifest["files"] if f.endswith(".md"))
        figures = ", ".join(f"[{f[:-4]}]({folder}/{f})" for f in manifest["files"] if f.endswith(".png"))
        rows.append(f"| [{manifest['study']}]({folder}/README.md) | {description} | "
                    f"{manifest.get('preset')} | {manifest['seed']} | {_wall_time(manifest)} | "
                    f"{tables} | {figures} |")
    text = ["# Results", "", "Committed outputs of every study at its default preset (and of some "
            "studies at another preset, a source's own regime or a larger scale, in a folder named "
            "STUDY_PRESET: `simrec run STUDY --preset PRESET --publish`). Regenerate one "
            "with `simrec run STUDY` (or all with `simrec run all`); each folder's `manifest.json` "
            "holds the exact config, seed, package versions, git commit and wall time, and "
            "`records.csv` the tidy records every table is computed from. Every claim of a source "
            "that a study checks, with its verdict, is gathered in [claims.md](claims.md).", "",
            "| study | what it shows | preset | seed | wall time | tables | figures |",
            "|---|---|---|---|---|---|---|", *rows]
    atomic_write_text(root / "README.md", "\n".join(text) + "\n")
    atomic_write_text(root / "claims.md", claims_page(root))
    return root / "README.md"


#: where a claim's source names the part of the work it cites (``Lim et al. RecSys'15, Table 1``,
#: ``Kiyohara et al. WSDM'22 §3; ...``): the work is the text before it
_SECTION = re.compile(r",?\s*(?:§|;|\b(?:Table|Fig|Lemma|Thm|App|Eq|Alg)\b)")
#: a table or figure named in a claim's evidence
_OUTPUT_NAME = re.compile(r"\b(?:table|fig)_\w+")


def _work(source: str) -> str:
    """The cited work of a claim's source, without the part of it (`_SECTION`)."""
    return _SECTION.split(source, maxsplit=1)[0].strip()


def _evidence(folder: Path, where: str) -> str:
    """A claim's evidence (free text naming tables and figures) with a link to the study's README
    and to every named table (.md) or figure (.png) that its folder holds."""
    def link(match: re.Match) -> str:
        name = match.group(0)
        for suffix in (".md", ".png"):
            if (folder / (name + suffix)).exists():
                return f"[{name}]({folder.name}/{name}{suffix})"
        return name
    return f"[{folder.name}]({folder.name}/README.md)" + (f": {_OUTPUT_NAME.sub(link, where)}" if where else "")


def _claims_frame(root: Path, default: bool):
    """Every claims row of the study folders below ``root`` run at their default preset (or, with
    ``default`` False, at another one), with its cited work (`_work`), folder and evidence links."""
    import pandas as pd
    frames = []
    for manifest_path in sorted(root.glob("*/manifest.json")):
        folder = manifest_path.parent
        if (json.loads(manifest_path.read_text()).get("preset") == "default") != default or \
                not (folder / "table_claims.csv").exists():
            continue
        table = pd.read_csv(folder / "table_claims.csv", keep_default_na=False, dtype=str).rename(
            columns={"source's number": "source_value"})
        evidence = [_evidence(folder, where) for where in table.evidence]
        frames.append(table.assign(work=table.source.map(_work), study=folder.name, link=evidence))
    return pd.concat(frames, ignore_index=True) if frames else None


def _claim_rows(part) -> list[str]:
    """The claims table of one cited work's rows: claim (with the part of the work cited), the
    source's number, ours, SE, verdict and evidence."""
    from simrec.reporting import markdown_cell
    lines = ["| claim | source's number | ours | SE | verdict | evidence |", "|---|---|---|---|---|---|"]
    for row in part.itertuples(index=False):
        section = row.source[len(row.work):].strip(" ,;")
        cells = [(f"{section}: " if section else "") + row.claim, row.source_value, row.ours, row.SE]
        lines.append("| " + " | ".join(map(markdown_cell, cells)) + f" | {row.verdict} | {row.link} |")
    return lines


def claims_page(root: Path | str) -> str:
    """The claims page (``results/claims.md``): every row of the ``table_claims.csv`` of every
    study folder below ``root`` run at its default preset, grouped by the cited work (most claims
    first): a count of verdicts per work, then per work each claim with the source's number, ours
    with its standard error, the verdict and links to the study and the tables that hold the
    evidence. Then the folders of other presets (the sources' own regimes, larger scales), apart so
    that the counts stay one row per claim: a count of verdicts per folder and its claims."""
    import pandas as pd
    from simrec.reporting import CLAIM_VERDICTS, VERDICT_RULE, markdown_cell

    root = Path(root)
    lines = ["# Claims", "", "Every claim of a source that a study of this repository checks, gathered "
             "from the committed `table_claims` of each study at its default preset; each study's "
             "README gives the setting, the mechanism behind a verdict and the caveats. The same or "
             "further claims tested at other presets (a source's own regime, a larger scale) follow in "
             "their own section, not in these counts. Regenerated with the results index "
             "(`simrec run STUDY --publish`).", ""]
    claims = _claims_frame(root, default=True)
    if claims is None:
        return "\n".join(lines + ["No study folder holds a claims table yet.", ""])
    works = claims.work.value_counts(sort=False).sort_values(ascending=False, kind="stable").index
    counts = pd.crosstab(claims.work, claims.verdict).reindex(index=works, columns=list(CLAIM_VERDICTS),
                                                                fill_value=0)
    lines += ["| work | " + " | ".join(CLAIM_VERDICTS) + " | claims | studies |",
              "|---|" + "---:|" * (len(CLAIM_VERDICTS) + 1) + "---|"]
    for work in works:
        studies = ", ".join(f"[{s}]({s}/README.md)" for s in dict.fromkeys(claims.study[claims.work == work]))
        lines.append(f"| {markdown_cell(work)} | " + " | ".join(str(n) for n in counts.loc[work])
                     + f" | {counts.loc[work].sum()} | {studies} |")
    lines.append("| all | " + " | ".join(str(n) for n in counts.sum()) + f" | {len(claims)} | |")
    lines += ["", "Verdicts: reproduced (the claim holds here), not reproduced (it fails here; the "
              "study's README says by which mechanism or in which setting), tie (neither side beyond "
              "the rule), differs in setting (our setting cannot match the source's), not testable. "
              "The rule for a difference: " + VERDICT_RULE + ".", ""]
    for work in works:
        lines += [f"## {work}", "", *_claim_rows(claims[claims.work == work]), ""]
    others = _claims_frame(root, default=False)
    if others is None:
        return "\n".join(lines)
    folders = list(dict.fromkeys(others.study))
    tally = pd.crosstab(others.study, others.verdict).reindex(index=folders, columns=list(CLAIM_VERDICTS),
                                                               fill_value=0)
    lines += ["## Other presets", "", "Claims checked by the committed folders of other presets, apart "
              "from the counts above (several repeat a default preset's claim in another setting).", "",
              "| folder | works | " + " | ".join(CLAIM_VERDICTS) + " | claims |",
              "|---|---|" + "---:|" * (len(CLAIM_VERDICTS) + 1)]
    for folder in folders:
        cited = ", ".join(map(markdown_cell, dict.fromkeys(others.work[others.study == folder])))
        lines.append(f"| [{folder}]({folder}/README.md) | {cited} | " + " | ".join(str(n) for n in tally.loc[folder])
                     + f" | {tally.loc[folder].sum()} |")
    lines.append("")
    for folder in folders:
        lines += [f"### {folder}", "", *_claim_rows(others[others.study == folder]), ""]
    return "\n".join(lines)
