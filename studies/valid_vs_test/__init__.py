"""Study ``valid_vs_test``: do validation scores predict test scores and what users want? (Lim Table 2, extended)

Lim, McAuley, Lanckriet (RecSys'15, §5) argue that a measure which is unbiased under simple random
sampling of the relevant items (ATOP, ADG, Recall@K: their "UBM" measures) takes the same
expected value on any two disjoint uniform samples of a user's held-out relevant items, whatever
their sizes, so validation predicts test; MAP and NDCG grow with the number of relevant items and
do not (their Table 2: -20 % to -24 % on MovieLens). In simulation the prior-relevant sets are
known, so the study adds the set that matters: the unobserved relevant items P⁺∖O⁺ (with all of
O⁺ excluded from the ranking), about five times larger than the test split at rate 1/2.

The study runs the cells of the Lim et al. experiment (`simrec_studies.common.lim`, as study
``opt_adg`` does) with its own config: a (dataset, method) cell searches the method's grid with
every model trained to convergence (early stopping on validation ADG) and evaluates the best
setting under both protocols (`lim.evaluate_model`). Its fits are those of ``opt_adg`` at the same
data and training settings, so after ``opt_adg`` (in the same cache folder) they are read from the
store of fitted models rather than trained again. The report keeps, per dataset, fold and method,
the setting with the best validation ADG (`lim_report.selected`, the same selection as
``opt_adg``). Diff% = 100 (X − test) / test of the fold means, as
Lim's.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from simrec.runner import Study
from simrec_studies.common import lim
from simrec_studies.common.lim import PRESET_DATA, PRESET_TRAINING, DataConfig, TrainConfig
from simrec_studies.valid_vs_test.report import report


@dataclass(frozen=True)
class ValidVsTestConfig:
    """As `opt_adg.OptADGConfig` (same meaning, same defaults except the methods: the oracle,
    popularity and the two MF models)."""
    worlds: tuple[str, ...] = ("amazon", "lastfm", "movielens")   # paper-like `simrec.world.PRESETS`
    #: a subset of `lim.METHODS`
    methods: tuple[str, ...] = ("oracle", "popularity", "mf_auc", "mf_adg")
    real: bool = True                                  # also the real datasets (when present)
    data: DataConfig = field(default_factory=DataConfig)
    training: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self):
        lim.check_datasets(self.worlds, self.methods)


PRESETS = {
    "smoke": ValidVsTestConfig(worlds=("tiny",), methods=("oracle", "popularity", "mf_adg"),
                               real=False, data=PRESET_DATA["smoke"],
                               training=PRESET_TRAINING["smoke"]),
    "default": ValidVsTestConfig(data=PRESET_DATA["default"],
                                 training=PRESET_TRAINING["default"]),
    "paper": ValidVsTestConfig(data=PRESET_DATA["paper"],
                               training=PRESET_TRAINING["paper"]),
}


STUDY = Study(
    name="valid_vs_test",
    description="Lim et al. Table 2 extended: UBM measures (ATOP, ADG, Recall@10) agree on valid, "
                "test and the unobserved relevant items P⁺∖O⁺; MAP and NDCG do not",
    presets=PRESETS, cells=lim.cells, setup=lim.setup, compute=lim.compute, report=report,
    columns=lim.COLUMNS, data_files=lim.data_files, expected_seconds={"smoke": 30, "default": 16, "paper": 4000},
    cell_threads=2)
