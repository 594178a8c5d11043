"""Study ``opt_adg``: MF-ADG against MF-AUC and baselines (Lim, McAuley, Lanckriet, RecSys'15, Table 1).

Lim §6 train the same matrix factorisation f(u, i) = <θᵤ, θᵢ> + bᵢ (k = 50) two ways — OPT-ADG
(Alg. 1, γ = 100) and the per-user AUC hinge — on four folds of 70/10/20 per-user splits of the
observed positives, pick λ on the validation split, and report ATOP, MAP, NDCG, Recall@10 and ADG
on the test split. Their finding: MF-ADG wins on the four top-heavy measures, ATOP is a draw or
favours MF-AUC, and a rank-k SVD is worse than both on every measure. This study re-runs that
protocol on the three paper-like simulated worlds of `simrec.world.PRESETS` (where a true-quality
oracle gives the ceiling), on MovieLens ml-latest-small (ratings >= 4 relevant) and on the HetRec
2011 last.fm listening data (every artist a user listened to is relevant; Cantador, Brusilovsky,
Kuflik, HetRec'11, non-commercial licence) when the files are present, with popularity,
truncated SVD and iALS as baselines.

Every trained model is trained to convergence: early stopping on its validation ADG
(`simrec.models.EarlyStopping`, every `eval_epochs` epochs of sampled pairs or every ALS sweep,
`patience` evaluations without improvement), with the spec's budget (`pairs`, `ials_sweeps`) only
as a safety net; the records say where the returned checkpoint is and whether the net ended the
run, and carry the validation curve. Hyper-parameters are searched on wide log-spaced grids by
coordinate search within a cell: the primary axis (MF and iALS λ, SVD rank) at the middle value
of the secondary one (MF learning rate, iALS unobserved weight), then the secondary axis at the
best primary value.

`setup` builds every dataset of the run (a sub-sampled world, P⁺, O⁺, P⁺∖O⁺ and the folds, or
the real data and its folds). A cell is (dataset, method): it searches the method's grid on the
train part of fold 0 and evaluates every setting on its validation split (held-out excluded), then
retrains the best setting on every other fold (each with early stopping on its own validation
split; selecting on one fold costs a third of per-fold searches, and fold 0's validation items may
be test items of another fold, a leak through two hyper-parameters only), and evaluates the
selected model of every fold on the full catalogue under two protocols (`evaluate_model`):
held-out excluded —
valid (train and test excluded), test (train and valid excluded) and, in simulation only, the
unobserved relevant items P⁺∖O⁺ (all of O⁺ excluded) — and train excluded, common users
(`valid_vs_test` reads that one). The report selects, per dataset, fold and method, the setting
with the best validation ADG (`selected`; the searched one on fold 0, the only one elsewhere);
`valid_vs_test` runs the same cells.

The datasets, cells and their computation are the experiment's, in `simrec_studies.common.lim`
(shared with `valid_vs_test`, which finds this study's fitted models in the store of fits); this
package holds the config and presets, and its report (`report.py`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from simrec.runner import Study
from simrec_studies.common import lim
from simrec_studies.common.lim import METHODS, PRESET_DATA, PRESET_TRAINING, DataConfig, TrainConfig, check_datasets
from simrec_studies.opt_adg.report import report


@dataclass(frozen=True)
class OptADGConfig:
    """The datasets and methods of a run, and how they are built and trained."""
    worlds: tuple[str, ...] = ("amazon", "lastfm", "movielens")   # paper-like `simrec.world.PRESETS`
    methods: tuple[str, ...] = METHODS                 # a subset of `METHODS`
    real: bool = True                                  # also the real datasets (when present)
    data: DataConfig = field(default_factory=DataConfig)
    training: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self):
        check_datasets(self.worlds, self.methods)


PRESETS = {
    "smoke": OptADGConfig(worlds=("tiny",), methods=("oracle", "popularity", "svd", "mf_auc", "mf_adg"), real=False,
                          data=PRESET_DATA["smoke"], training=PRESET_TRAINING["smoke"]),
    **{name: OptADGConfig(methods=("oracle", "popularity", "svd", "mf_auc", "mf_adg"), data=PRESET_DATA[name],
                          training=PRESET_TRAINING[name]) for name in ("default", "paper")},
}

STUDY = Study(
    name="opt_adg",
    description="Lim et al. Table 1: MF-ADG (OPT-ADG) vs MF-AUC and baselines trained to convergence "
                "on the paper-like worlds, ml-latest-small and HetRec last.fm, wide grids selected by "
                "validation ADG, paired tests over folds",
    presets=PRESETS, cells=lim.cells, setup=lim.setup, compute=lim.compute, report=report,
    columns=lim.COLUMNS, data_files=lim.data_files, expected_seconds={"smoke": 40, "default": 225, "paper": 1200},
    cell_threads=2)
