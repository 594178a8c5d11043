"""Off-policy estimators of online reward from logged feeds, and one registry of them.

`simrec.ope.dcg` holds DCG as clipped IPS and its relatives (nDCG with either ideal, pnDCG,
self-normalised and doubly robust DCG; Jeunen et al. KDD'24), `simrec.ope.slate` the slate
estimators that reweight the logged ranking itself (RIPS, SIPS, Cascade-DR), each a function with
its formula and reference, and `simrec.ope.baseline` the variance-optimal baseline of β-IPS and
Δβ-IPS; `simrec.ope.registry` registers each estimator once (`ESTIMATORS`: name, label, what it
needs, assumption, reference) and `compare` evaluates many target policies against a logger on one
log with every registered estimator and every clipping value m at once, as one tidy frame with
paired differences and intervals. Every public name of the four is available from ``simrec.ope``.
"""
from simrec.ope.dcg import *  # noqa: F401,F403 - the estimators' public names
from simrec.ope.dcg import IDEALS, __all__ as _dcg_all
from simrec.ope.baseline import optimal_baseline  # noqa: F401
from simrec.ope.slate import *  # noqa: F401,F403
from simrec.ope.slate import __all__ as _slate_all
from simrec.ope.registry import *  # noqa: F401,F403
from simrec.ope.registry import __all__ as _registry_all

__all__ = ["IDEALS", *_dcg_all, "optimal_baseline", *_slate_all, *_registry_all]
