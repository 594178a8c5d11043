"""The off-policy comparison of an OPE study: which policies are compared on a logger's log, and how.

An OPE study logs sessions of a logging policy R₀ and scores target policies R_t on that log
(`simrec.ope.compare`): targets meant to beat R₀ (``improving``) and targets meant to lose to it
(``harmful``; the exact online value decides either way), for every clipping value m of a grid, with
normal confidence intervals at ``confidence``, and nDCG's rule for sessions without a positive label
(``zero_ideal``). `Comparison` is that block of a study's config, validated once here
(`simrec.validate`), so every OPE study reads the same keys: on the command line
``--set comparison.m=1,10,inf`` (``simrec sweep m`` finds ``comparison.m`` by its suffix).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from simrec import validate
from simrec.config import ConfigError
from simrec_studies.common import scenarios
from simrec_studies.common.configs import checked
from simrec_studies.common.scenarios import Trained

__all__ = ["Comparison", "ZERO_IDEALS"]

#: nDCG of a session whose ideal DCG is 0: counted as 0, or skipped (`simrec.ope.trajectory_ndcg`)
ZERO_IDEALS = ("zero", "skip")
_RANKERS = (scenarios.Trained, scenarios.Popularity, scenarios.NoisyOracle)


@dataclass(frozen=True)
class Comparison:
    """Policies and settings of an off-policy comparison (module docstring)."""
    #: the ranker of R₀ (epsilon-greedy around it, `scenarios.logging_policy`)
    logger: scenarios.RankerField = field(default_factory=lambda: Trained("r0"))
    #: rankers of deterministic targets intended to beat R₀ (labels on the command line, e.g. rt,oracle@1)
    improving: tuple[scenarios.RankerField, ...] = (Trained("rt"),)
    #: rankers of deterministic targets intended to lose to R₀ (the exact online value decides)
    harmful: tuple[scenarios.RankerField, ...] = ()
    m: tuple[float, ...] = (1.0, math.inf)           # clipping values m >= 1 (inf = none)
    confidence: float = 0.99                         # level of the normal confidence intervals
    zero_ideal: str = "zero"                         # nDCG of sessions with no positive label: "zero" or "skip"

    def __post_init__(self):
        for name, rankers in (("logger", (self.logger,)), ("improving", self.improving), ("harmful", self.harmful)):
            if not isinstance(rankers, tuple) or not all(isinstance(r, _RANKERS) for r in rankers):
                raise ConfigError(f"comparison.{name} must hold rankers such as Trained('rt') or NoisyOracle(2.0) "
                                  f"(on the command line their labels, e.g. rt,oracle@2), got {rankers!r}")
        if not self.improving:
            raise ConfigError("comparison.improving must name at least one target ranker, e.g. (Trained('rt'),)")
        names = [scenarios.ranker_label(r) for r in self.policies]
        if len(set(names)) != len(names):
            raise ConfigError(f"comparison.logger, improving and harmful must be distinct rankers, got {names}")
        checked(validate.clipping_values, "comparison.m", self.m)
        checked(validate.probability, "comparison.confidence", self.confidence, low_open=True, high_open=True)
        checked(validate.choice, "comparison.zero_ideal", self.zero_ideal, ZERO_IDEALS)

    @property
    def targets(self) -> tuple:
        """The target rankers: improving, then harmful."""
        return self.improving + self.harmful

    @property
    def policies(self) -> tuple:
        """Every ranker compared: the logger first, then the targets."""
        return (self.logger,) + self.targets
