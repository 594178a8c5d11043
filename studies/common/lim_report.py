"""What the reports of ``opt_adg`` and ``valid_vs_test`` share about the Lim et al. experiment
(`simrec_studies.common.lim`): metric labels, the selection of one setting per (dataset, fold,
method) and the data and training budget in words."""
from __future__ import annotations

import pandas as pd

from simrec_studies.common.lim import HELD_OUT, STOP_METRIC, DataConfig, TrainConfig, middle

LABELS = {"atop": "ATOP", "ap": "MAP", "ndcg": "NDCG", "recall@10": "Recall@10", "adg": "ADG"}
GRID_COLUMNS = ["l2", "lr", "rank", "weight"]


def selected(records: pd.DataFrame) -> pd.DataFrame:
    """The records (every protocol, set and metric, and the validation curve) of the setting with
    the best validation ADG (held-out protocol) per (dataset, fold, method); ties go to the
    first setting searched."""
    keys = ["dataset", "fold", "method"]
    valid_adg = records[(records.protocol == HELD_OUT) & (records.set == "valid")
                        & (records.metric == STOP_METRIC)]
    best = (valid_adg.sort_values("value", ascending=False, kind="stable")
            .drop_duplicates(keys)[keys + GRID_COLUMNS])
    return records.merge(best, on=keys + GRID_COLUMNS)


def budget_text(config, data: DataConfig, training: TrainConfig) -> str:
    """The data and training budget of a preset, in words."""
    users = "all users" if data.n_users == 0 else f"{data.n_users} users drawn from each world"
    described = {"oracle": "the true-quality oracle (logit of q(u, i), simulation only)",
                 "popularity": "popularity",
                 "svd": f"truncated SVD (ranks {list(training.svd_ranks)})",
                 "ials": f"iALS (k = {training.dim}, λ grid {list(training.ials_l2s)}, unobserved "
                         f"weight grid {list(training.ials_weights)}, early stopping every sweep, "
                         f"at most {training.ials_sweeps} sweeps)"}
    baselines = [text for method, text in described.items() if method in config.methods]
    return (f"Worlds: {', '.join(config.worlds)} ({users}; full item catalogue), SRS observation "
            f"rate {data.observation_rate}, {data.n_folds} folds of "
            f"{'/'.join(f'{round(100 * f)}' for f in data.fractions)} per-user splits. MF-AUC and "
            f"MF-ADG: k = {training.dim}, γ = {training.gamma:g}, batch {training.batch_size}, optax "
            f"{training.optimizer}, trained until validation {LABELS[STOP_METRIC]} (training items "
            f"excluded, checked every {training.eval_epochs} epochs) has not improved for "
            f"{training.patience} checks, best checkpoint returned, at most {training.pairs:,} "
            f"sampled (u, i⁺) pairs (the safety net); λ grid {list(training.l2s)} at learning "
            f"rate {middle(training.learning_rates):g}, then learning rates "
            f"{list(training.learning_rates)} at the best λ, each stage stepping up to "
            f"{training.edge_steps} times past its grid's edge (by the grid's ratio) while the "
            f"best value sits on it; same initial parameters for every "
            f"model. Baselines: " + ", ".join(baselines) + ". Grids are searched on fold 0 by "
            "held-out validation ADG; the selected setting is retrained on every fold. Real data "
            f"(when present and asked for): ml-latest-small (all users, ratings >= "
            f"{data.real_threshold:g} relevant) and HetRec last.fm (all users, artists with >= "
            f"{data.hetrec_min_listeners} listeners, every listened artist relevant), same protocol.")
