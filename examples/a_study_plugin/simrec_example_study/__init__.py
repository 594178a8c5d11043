"""Study ``observed_metrics``: ADG and nDCG computed on observed relevance against the same metric
on complete relevance (Lim, McAuley & Lanckriet, RecSys'15, Thm 1–2), as a simrec study package.

The layout every study package can follow:

* ``__init__.py`` (this file): the config dataclass, its presets and the `Study` value that the
  entry point in ``pyproject.toml`` names;
* ``compute.py``: ``setup``, ``cells`` and ``compute``, everything that makes the records. Its
  source, and that of every module it imports from this package and simrec, is the study's code
  version: an edit there recomputes the cells;
* ``report.py``: ``report``, records to tables, verdicts and claims. Left out of the code version,
  so an edit there re-renders the tables from the cached cells in seconds.
"""
from dataclasses import dataclass, field

from simrec.runner import Study
from simrec.world import WorldConfig

from simrec_example_study.compute import cells, compute, setup
from simrec_example_study.report import report


@dataclass(frozen=True)
class Config:
    """Settings of the study: `simrec show observed_metrics` lists them with these comments, and
    ``--set KEY=VALUE`` overrides one (``--set world.n_users=1000 --set rates=0.1,0.9``)."""
    world: WorldConfig = field(default_factory=lambda: WorldConfig(n_users=500, n_items=200))
    rates: tuple[float, ...] = (0.2, 0.5, 0.8)   # observation rates: expected share of a user's relevant items observed
    draws: int = 10                              # independent observed sets per rate
    noise: float = 2.0                           # SD of the noise added to the true logits: the ranker's scores

    def __post_init__(self):                     # validate eagerly; the runner reports the message in one line
        if not self.rates or not all(0 < r <= 1 for r in self.rates):
            raise ValueError(f"rates must be a non-empty tuple of numbers in (0, 1], got {self.rates!r}")
        if self.draws < 2:
            raise ValueError(f"draws must be >= 2 (a standard error needs two), got {self.draws}")


PRESETS = {"smoke": Config(rates=(0.5,), draws=5), "default": Config()}

STUDY = Study(
    name="observed_metrics",
    description="Lim et al. RecSys'15 Thm 1-2: ADG on observed relevance is unbiased for ADG on complete "
                "relevance, nDCG is not (an example study package)",
    presets=PRESETS, setup=setup, cells=cells, compute=compute, report=report,
    columns={"rate": float, "draw": int, "metric": str, "observed": float, "complete": float},
    expected_seconds={"smoke": 15, "default": 25},
)
