"""Are committed results what the code and data produce now? Checks and comparisons of output folders.

A finished output folder's ``manifest.json`` names the study, preset, config, seed, the code
version (a digest of the source the study imports, `simrec.codeversion.code_version`) and the digest of
every real-data file it read. `check_folder` compares those with the code, the preset and the data
here, without computing anything:

* **fresh** — code version, config and data digests all match: `simrec run STUDY` reproduces it;
* **stale** — one of them differs (each difference is named);
* **foreign** — the folder cannot be checked (no manifest fields to check, or a study that is not
  installed);
* **unchecked** — a data file it read is absent here, so the data cannot be compared.

Differing package versions (numpy, jax, ...) are reported beside the status, never counted as
stale: the same code may run on newer releases. `compare_folders` says which files of a new run
equal a committed folder byte for byte.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

__all__ = ["FRESH", "STALE", "FOREIGN", "UNCHECKED", "FolderStatus", "check_folder", "Comparison",
           "compare_folders", "read_manifest"]

FRESH, STALE, FOREIGN, UNCHECKED = "fresh", "stale", "foreign", "unchecked"


@dataclass(frozen=True)
class FolderStatus:
    """The check of one output folder: ``status`` (fresh, stale, foreign, unchecked), the
    ``reasons`` for it, and ``packages``: installed versions that differ from the manifest's."""
    folder: Path
    study: str | None
    preset: str | None
    status: str
    reasons: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    benchmark: bool = False

    @property
    def default_preset(self) -> bool:
        """A study's default-preset folder (``results/STUDY``): what ``simrec run all --stale``
        regenerates and what the test suite requires to be fresh."""
        return not self.benchmark and self.preset == "default" and self.folder.name == self.study

    @property
    def command(self) -> str:
        """The command that regenerates the folder."""
        if self.benchmark:
            return f"simrec bench {self.study} --out {self.folder}"
        if self.default_preset:
            return f"simrec run {self.study} --publish"
        return f"simrec run {self.study} --preset {self.preset} --out {self.folder}"

    def line(self) -> str:
        text = f"{self.status:<9} {self.folder}"
        if self.reasons:
            text += f": {'; '.join(self.reasons)}"
        if self.status == STALE:
            text += f" (regenerate: {self.command})"
        if self.packages:
            text += f" [packages differ: {', '.join(self.packages)}]"
        return text


def read_manifest(folder: Path | str) -> dict | None:
    """The folder's manifest, or None when it has none or it is not JSON."""
    try:
        manifest = json.loads((Path(folder) / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def _packages(manifest: dict) -> tuple[str, ...]:
    from simrec.runner import package_versions
    recorded, installed = manifest.get("versions") or {}, package_versions()
    return tuple(f"{name} {recorded[name]} -> {installed.get(name, 'absent')}" for name in sorted(recorded)
                 if installed.get(name) != recorded[name])


def _data_reasons(manifest: dict, declared: list[str]) -> tuple[list[str], list[str]]:
    """(stale reasons, absent files) of the manifest's data against the files here."""
    from simrec import datafiles
    recorded = {entry.get("file"): entry.get("sha256") for entry in manifest.get("data") or []}
    stale, absent = [], []
    if "data" not in manifest and declared:
        files = ", ".join(declared) if len(declared) <= 3 else f"{len(declared)} files"
        stale.append(f"data not recorded (the study reads {files})")
        return stale, absent
    for name in sorted(set(declared) - set(recorded)):
        stale.append(f"data file {name} is read now but was not then")
    for name in sorted(set(recorded) - set(declared)):
        stale.append(f"data file {name} was read then but is not now")
    for now in datafiles.describe([f for f in declared if f in recorded]):
        then = recorded[now.file]
        if not now.present:
            absent.append(now.file)
        elif then is None:
            stale.append(f"data file {now.file} was absent then and is present now")
        elif now.sha256 != then:
            stale.append(f"data file {now.file} changed (sha256 {then[:12]}… then, {now.sha256[:12]}… now)")
    return stale, absent


def check_folder(folder: Path | str, studies: Mapping[str, Callable[[], object]],
                 benchmarks: Mapping[str, str] = {}) -> FolderStatus:
    """Check one output folder (module docstring). ``studies``: name -> loader of the installed
    `simrec.runner.Study`; ``benchmarks``: name -> module of an installed benchmark, whose folders
    record the benchmark module's version."""
    from simrec.config import config_to_dict
    from simrec.codeversion import code_version, module_version
    from simrec.runner import canonical_json
    folder = Path(folder)
    manifest = read_manifest(folder)
    if manifest is None:
        return FolderStatus(folder, None, None, FOREIGN, ("no readable manifest.json",))
    name, preset = manifest.get("study"), manifest.get("preset")
    packages = _packages(manifest)
    if not manifest.get("benchmark") and name not in studies and name in benchmarks:
        return FolderStatus(folder, name, preset, STALE,
                            ("written by the benchmark before its manifests recorded a code version",),
                            packages, benchmark=True)
    if manifest.get("benchmark"):
        module = benchmarks.get(manifest["benchmark"])
        if module is None:
            return FolderStatus(folder, name, preset, FOREIGN, (f"benchmark {manifest['benchmark']!r} is not installed",),
                                packages, benchmark=True)
        now, then = module_version(module), manifest.get("code_version")
        reasons = () if now == then else (f"code version {then} then, {now} now",)
        return FolderStatus(folder, manifest["benchmark"], preset, STALE if reasons else FRESH, reasons, packages,
                            benchmark=True)
    if name not in studies:
        return FolderStatus(folder, name, preset, FOREIGN, (f"study {name!r} is not installed",), packages)
    if not manifest.get("code_version"):
        return FolderStatus(folder, name, preset, FOREIGN, ("the manifest records no code version",), packages)
    study = studies[name]()
    reasons = []
    now = code_version(study)
    if now != manifest["code_version"]:
        reasons.append(f"code version {manifest['code_version']} then, {now} now")
    if preset not in study.presets:
        return FolderStatus(folder, name, preset, FOREIGN, (f"study {name!r} has no preset {preset!r}",), packages)
    config = study.presets[preset]
    if canonical_json(config_to_dict(config)) != canonical_json(manifest.get("config")):
        reasons.append(f"config differs from preset {preset!r}")
    declared = [f for f in dict.fromkeys(study.data_files(config) if study.data_files else ()) if f]
    data_stale, absent = _data_reasons(manifest, declared)
    reasons += data_stale
    if reasons:
        return FolderStatus(folder, name, preset, STALE, tuple(reasons), packages)
    if absent:
        return FolderStatus(folder, name, preset, UNCHECKED, (f"data absent here: {', '.join(absent)}",), packages)
    return FolderStatus(folder, name, preset, FRESH, (), packages)


@dataclass(frozen=True)
class Comparison:
    """Which files of a new output folder equal a committed one byte for byte (``manifest.json``,
    which records times and machines, is left out)."""
    identical: tuple[str, ...] = ()
    different: tuple[str, ...] = ()
    only_new: tuple[str, ...] = ()
    only_committed: tuple[str, ...] = ()
    files: tuple[str, ...] = field(default=(), repr=False)

    @property
    def same(self) -> bool:
        return not (self.different or self.only_new or self.only_committed)

    def line(self, committed: Path | str) -> str:
        tables = [f for f in self.files if f.startswith("table") and f.endswith(".csv")]
        same_tables = [f for f in tables if f in self.identical]
        text = (f"{len(same_tables)} of {len(tables)} tables and {len(self.identical)} of {len(self.files)} files "
                f"identical to the committed results in {committed}")
        parts = [("differ", self.different), ("only in this run", self.only_new),
                 ("only in the committed folder", self.only_committed)]
        details = "; ".join(f"{label}: {', '.join(names)}" for label, names in parts if names)
        return text + (f" ({details})" if details else "")


def compare_folders(new: Path | str, committed: Path | str) -> Comparison:
    """Compare every file of two output folders but ``manifest.json`` (tables, figures,
    ``records.csv``, ``README.md``)."""
    def names(folder: Path) -> set[str]:
        return {p.name for p in folder.iterdir() if p.is_file() and p.name != "manifest.json"} if folder.is_dir() else set()
    new, committed = Path(new), Path(committed)
    ours, theirs = names(new), names(committed)
    both = sorted(ours & theirs)
    identical = [f for f in both if (new / f).read_bytes() == (committed / f).read_bytes()]
    return Comparison(identical=tuple(identical), different=tuple(f for f in both if f not in identical),
                      only_new=tuple(sorted(ours - theirs)), only_committed=tuple(sorted(theirs - ours)),
                      files=tuple(sorted(ours | theirs)))
