"""One tuning loop, and fitted models cached by content so that studies share them.

    tuning = tune(key, grid, spec_of, train, validation=valid)      # fit every point, stop early
    tuning.selection.point, tuning.selection.edges                    # the chosen point; grid edges
    model = fitted(key, spec_of(tuning.selection.point, budget=tuning.best.budget), train + valid)

`tune` fits every grid point (a mapping of hyperparameters) with `spec_of(point)`, scores it on the
validation data — the best checkpoint of its early stopping (`simrec.models.best_checkpoint`), or
``value(model)`` when given — and selects the best with `simrec.models.select`, which flags a
hyperparameter chosen at the edge of its grid. Each trial keeps its validation curve, for the
study's convergence figures.

`fitted` is `simrec.models.fit` through a content-addressed store: a model is saved under the
digest of (its spec's `spec_id`, the training data, the validation data, the key, the pair
budget), not under the study that asked for it, so two studies (or two cells) that fit the same
model on the same data share one fit. The store is active inside ``with store(folder):`` (the
runner opens one in its cache folder for every setup and cell); outside it `fitted` just fits.
Files are written atomically and an unreadable one is refitted.
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import pickle
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

import jax
import numpy as np
import scipy.sparse as sp

from simrec.models.api import RMSE, Model, Spec, best_checkpoint, fit, spec_id
from simrec.models.selection import Selection, select

__all__ = ["Trial", "Tuning", "tune", "fitted", "store", "data_digest", "fit_address"]


@dataclass(frozen=True)
class Trial:
    """One grid point of `tune`: its hyperparameters, validation value, the budget of its best
    checkpoint (None without early stopping) and its validation curve ((budget, value), ...)."""
    point: Mapping[str, float]
    value: float
    budget: int | None
    curve: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True)
class Tuning:
    """The trials of `tune` in grid order and the `simrec.models.Selection` among them."""
    trials: tuple[Trial, ...]
    selection: Selection

    @property
    def best(self) -> Trial:
        return self.trials[self.selection.index]


def tune(key: jax.Array | None, grid: Sequence[Mapping[str, float]], spec_of: Callable[[Mapping[str, float]], Spec],
         train, *, validation=None, pairs: int | None = None, value: Callable[[Model], float] | None = None,
         higher_is_better: bool | None = None) -> Tuning:
    """Fit every point of ``grid`` (`fitted`, the same key for each) and select the best.

    spec_of: point -> spec (with ``early_stopping`` when ``validation`` is given); value: the
    validation value of a fitted model, by default its best checkpoint's (`best_checkpoint`);
    higher_is_better: by default False for an RMSE early-stopping metric, else True. A grid of
    one empty point (nothing to tune, e.g. popularity) gives that point, unflagged.
    """
    grid = [dict(point) for point in grid]
    if not grid:
        raise ValueError("grid is empty; pass at least one point, e.g. [{'l2': 0.1}] (or [{}] for none)")
    trials = []
    for point in grid:
        spec = spec_of(point)
        model = fitted(key, spec, train, validation=validation if getattr(spec, "early_stopping", None) else None,
                       pairs=pairs)
        best = best_checkpoint(model)
        if value is None and best is None:
            raise ValueError(f"{type(spec).__name__} has no early stopping, so tune needs value=(model -> "
                             f"validation value) to score it")
        trials.append(Trial(point, float(value(model)) if value is not None else best[1],
                            None if best is None else best[0], model.curve))
    if higher_is_better is None:
        stopping = getattr(spec_of(grid[0]), "early_stopping", None)
        higher_is_better = not (stopping is not None and stopping.metric == RMSE)
    if grid == [{}]:
        selection = Selection(index=0, point={}, value=trials[0].value, edges=(), unsearched=())
    else:
        selection = select(grid, [t.value for t in trials], higher_is_better=higher_is_better)
    return Tuning(tuple(trials), selection)


# ---- the content-addressed store ------------------------------------------------------------------

_store: contextvars.ContextVar[tuple[Path, bool] | None] = contextvars.ContextVar("simrec_model_store",
                                                                                  default=None)


@contextlib.contextmanager
def store(folder: Path | str | None, *, write: bool = True) -> Iterator[None]:
    """Inside the block `fitted` reads and (with ``write``) saves fitted models in ``folder``
    (None: no store)."""
    token = _store.set(None if folder is None else (Path(folder), write))
    try:
        yield
    finally:
        _store.reset(token)


def data_digest(matrix) -> str:
    """SHA-256 of a matrix's content: shape, dtype and values (scipy.sparse: its canonical CSR
    arrays; dense: the array's bytes); None gives the digest of nothing."""
    h = hashlib.sha256()
    if matrix is None:
        h.update(b"none")
    elif sp.issparse(matrix):
        csr = sp.csr_matrix(matrix)
        csr.sum_duplicates()
        csr.sort_indices()
        h.update(repr((csr.shape, str(csr.dtype))).encode())
        for part in (csr.indptr, csr.indices, csr.data):
            h.update(np.ascontiguousarray(part).tobytes())
    else:
        array = np.ascontiguousarray(np.asarray(matrix))
        h.update(repr((array.shape, str(array.dtype))).encode())
        h.update(array.tobytes())
    return h.hexdigest()


def fit_address(key: jax.Array | None, spec: Spec, train, validation=None, pairs: int | None = None) -> str:
    """The store address of a fit: a digest of everything `simrec.models.fit` reads."""
    key_part = "none" if key is None else np.asarray(jax.random.key_data(key)).tobytes().hex()
    text = "|".join([spec_id(spec), data_digest(train), data_digest(validation), key_part, repr(pairs)])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def fitted(key: jax.Array | None, spec: Spec, train, *, validation=None, pairs: int | None = None,
           seconds: bool = False):
    """`simrec.models.fit`, read from or saved to the active `store` (module docstring).

    Returns the `Model`, or with ``seconds=True`` (model, the wall seconds its fit took): those
    of the fit that made it, also when it is read from the store, so a study that reports fit
    times reports the same ones whether it fitted or found the model.
    """
    active = _store.get()
    path = None
    if active is not None:
        folder, write = active
        path = folder / f"{type(spec).__name__}-{fit_address(key, spec, train, validation, pairs)}.pkl"
        try:
            entry = pickle.loads(path.read_bytes())
            if (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], Model)
                    and spec_id(entry[0].spec) == spec_id(spec)):
                return entry if seconds else entry[0]
        except Exception:                      # noqa: BLE001 - absent or unreadable: fit it again
            pass
    start = time.perf_counter()
    model = jax.block_until_ready(fit(key, spec, train, validation=validation, pairs=pairs))
    entry = (model, time.perf_counter() - start)
    if path is not None and write:
        from simrec.output import atomic_write_bytes
        with contextlib.suppress(OSError):
            atomic_write_bytes(path, pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL))
    return entry if seconds else model
