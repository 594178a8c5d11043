"""The plugin example of docs/guide/writing-a-study.md, run as another installed package would be:
found through the ``simrec.studies`` entry point and run by the ``simrec`` command."""
import re
import subprocess
import sys
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide" / "writing-a-study.md"


def _example() -> tuple[str, str]:
    block = GUIDE.read_text().split("<!-- plugin-example:start -->")[1].split("<!-- plugin-example:end -->")[0]
    python = re.search(r"```python\n(.*?)```", block, re.S).group(1)
    toml = re.search(r"```toml\n(.*?)```", block, re.S).group(1)
    return python, toml


def test_a_study_registered_by_another_package_is_listed_and_runs(tmp_path):
    python, toml = _example()
    site = tmp_path / "site"
    (site / "hello_simrec-0.1.dist-info").mkdir(parents=True)
    (site / "hello_simrec.py").write_text(python)
    (site / "hello_simrec-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: hello-simrec\nVersion: 0.1\n")
    # what pip writes from that pyproject table: an INI section without the TOML quotes
    entry_points = toml.split("\n", 1)[1].replace('[project.entry-points."simrec.studies"]', "[simrec.studies]")
    entry_points = entry_points.replace('"', "")
    (site / "hello_simrec-0.1.dist-info" / "entry_points.txt").write_text(entry_points)
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"}
    listed = subprocess.run([sys.executable, "-m", "simrec", "list"], capture_output=True, text=True, env=env)
    assert "hello" in listed.stdout and "Metrics of a random ranker." in listed.stdout, listed.stderr
    out = tmp_path / "out"
    ran = subprocess.run([sys.executable, "-m", "simrec", "run", "hello", "--preset", "smoke", "--out", str(out),
                          "--quiet"], capture_output=True, text=True, env=env)
    assert ran.returncode == 0, ran.stderr
    table = (out / "table_random_ranker.csv").read_text().splitlines()
    assert table[0] == "metric,mean,sem" and len(table) == 3
    assert (out / "records.csv").read_text().startswith("draw,metric,value")
