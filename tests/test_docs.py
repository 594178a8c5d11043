"""The documentation works as written: the site builds without a warning (`mkdocs build --strict`),
every example script runs and prints what it shows, the README's example is the quickstart script,
the example study package runs under `simrec run`, the code examples of the guide and the API
overview run, and every relative link of README.md and docs/ points to an existing file."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the quickstart first: the others reuse the programs it compiles (a shared compilation cache)
EXAMPLES = sorted((ROOT / "examples").glob("*.py"), key=lambda p: (p.name != "quickstart.py", p.name))
PLUGIN = ROOT / "examples" / "a_study_plugin"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

#: a line each script prints when it got to its point
KEY_LINES = {"quickstart.py": "exact online clicks per session: logger",
             "metrics_on_observed_data.py": "observed / complete",
             "ope_sweep_over_m.py": "target 'worse': exact online difference",
             "tune_a_model.py": "MF-ADG selects"}
#: smaller sizes where they save time; the log of ope_sweep_over_m keeps the quickstart's size, whose
#: compiled simulation it reuses (compiling, not computing, is most of every script's time)
SMALL = {"metrics_on_observed_data.py": {"DRAWS": "3"}}


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    """The environment of the subprocesses: one persistent JAX compilation cache shared by every
    script (they compile the same world and feed programs), also across pytest-xdist workers."""
    base = tmp_path_factory.getbasetemp()
    cache = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "simrec-docs-jax-cache"
    cache.mkdir(exist_ok=True)
    return {**os.environ, "MPLBACKEND": "Agg", "JAX_COMPILATION_CACHE_DIR": str(cache),
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}


#: HTML elements (HTML5 and what mkdocs' theme uses); any other "tag" in a page is docstring text such
#: as <x_u, y_i> that Markdown took for raw HTML, and a browser would hide
HTML_ELEMENTS = frozenset("""a abbr address area article aside audio b base bdi bdo blockquote body br button canvas
caption cite code col colgroup data datalist dd del details dfn dialog div dl dt em embed fieldset figcaption figure
footer form h1 h2 h3 h4 h5 h6 head header hgroup hr html i iframe img input ins kbd label legend li link main map mark
menu meta meter nav noscript object ol optgroup option output p param picture pre progress q rp rt ruby s samp script
search section select slot small source span strong style sub summary sup svg path table tbody td template textarea
tfoot th thead time title tr track u ul var video wbr""".split())


def _main(page: Path) -> str:
    """The content of a built page (after the theme's navigation and scripts)."""
    return page.read_text().split('role="main"', 1)[-1]


def test_the_site_builds_without_a_warning(tmp_path):
    site = tmp_path / "site"
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                           cwd=ROOT, capture_output=True, text=True)
    assert built.returncode == 0 and "WARNING" not in built.stderr + built.stdout, built.stderr
    assert (site / "api" / "ope-registry" / "index.html").read_text().count("doc-heading") > 5
    swallowed = [f"{page.relative_to(site)}: {match.group(0)}" for page in sorted(site.rglob("*.html"))
                 for match in re.finditer(r"</?([A-Za-z][^\s<>/]*)[^<>]{0,30}", _main(page))
                 if match.group(1).lower() not in HTML_ELEMENTS]
    assert not swallowed, swallowed


def test_every_example_has_a_key_line():
    assert {p.name for p in EXAMPLES} == set(KEY_LINES)


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(script, env):
    ran = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env={**env, **SMALL.get(script.name, {})})
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert KEY_LINES[script.name] in ran.stdout, ran.stdout


def _code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def test_the_readme_example_is_the_quickstart_script():
    readme = (ROOT / "README.md").read_text()
    example = _code_blocks(readme.split("## A first program")[1], "python")[0]
    assert example.strip() in (ROOT / "examples" / "quickstart.py").read_text()
    assert len(readme.splitlines()) <= 200


def test_the_readme_opens_with_the_two_commands_and_ci_runs_the_second():
    blocks = _code_blocks((ROOT / "README.md").read_text(), "bash")
    assert blocks[0].strip().endswith("pip install -e . && simrec run correlation")
    tests = blocks[1].strip().split(" && ", 2)[2]                 # after the venv: the install and pytest
    assert tests == "pip install -e '.[test]' && python -m pytest"
    ci = (ROOT / ".ci" / "run").read_text().replace("pip install -q ", "pip install ")   # CI installs quietly
    assert tests in ci.splitlines()


def test_the_example_study_package_runs_under_simrec(tmp_path, env):
    """Installed as pip would install it (its entry point, from its pyproject.toml), the study is
    found by the simrec command and runs its smoke preset: a table, claims and a README."""
    project = tomllib.loads((PLUGIN / "pyproject.toml").read_text())["project"]
    info = tmp_path / "site" / f"simrec_example_study-{project['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    entries = project["entry-points"]["simrec.studies"]
    (info / "entry_points.txt").write_text("[simrec.studies]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()))
    out = tmp_path / "out"
    ran = subprocess.run([sys.executable, "-m", "simrec", "run", "observed_metrics", "--preset", "smoke",
                          "--out", str(out), "--quiet"], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                         env={**env, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(PLUGIN)])})
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert (out / "table_bias.csv").read_text().startswith("metric,rate,mean,se,n,verdict,expected")
    assert "## Claims" in (out / "README.md").read_text()
    assert (out / "table_claims.csv").read_text().count("Lim et al. RecSys'15") == 2


def _marked_example(page: Path, marker: str) -> str:
    block = page.read_text().split(f"<!-- {marker}:start -->")[1].split(f"<!-- {marker}:end -->")[0]
    return _code_blocks(block, "python")[0]


def test_the_estimator_example_registers_and_compares(monkeypatch, capsys):
    from simrec import ope
    monkeypatch.setattr(ope.registry, "ESTIMATORS", dict(ope.ESTIMATORS))      # leave the registry as it was
    page = ROOT / "docs" / "guide" / "writing-a-study.md"
    exec(compile(_marked_example(page, "estimator-example"), str(page), "exec"), {})
    assert "ratio_ips" in ope.registry.ESTIMATORS and "ratio_ips" in capsys.readouterr().out


def test_the_api_example_runs(capsys):
    page = ROOT / "docs" / "api" / "index.md"
    exec(compile(_marked_example(page, "api-example"), str(page), "exec"), {})
    assert "'ndcg@10':" in capsys.readouterr().out


def _links(page: Path) -> list[str]:
    """Targets of the Markdown links and images of a page, outside code."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_point_to_files(page):
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue                                       # a URL or an anchor on the same page
        path = (page.parent / target.split("#")[0]).resolve()
        if not path.exists():
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: links to missing files: {broken}"
