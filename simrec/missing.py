"""Missing-data model of implicit feedback (Lim et al., RecSys'15, §2) and data splits.

Each user u has a prior-relevant set P+_u (every item u would find relevant) and an observed set
O+_u ⊆ P+_u (the items u happened to consume). Lim's model takes O+_u to be a simple random sample
(SRS) of P+_u whose size is unknown to the evaluator; the MNAR variants here break that
assumption on purpose (observation favouring popular or high-quality items) to show what goes
wrong when it fails. Sets are `scipy.sparse.csr_matrix` of dtype bool, shape [U, I], with sorted
column indices; the sparse bookkeeping runs on the host in numpy while every random number comes
from an explicit `jax.random` key.

Observation size rule (shared by every observation model, and by `expected_observed_count`):

    |O+_u| = max(floor(rate_u * |P+_u| + 1/2), 1)   if |P+_u| >= 1 and rate_u > 0, else 0,

i.e. rate_u * |P+_u| rounded half up (computed in float64 with a 1e-9 slack so that a decimal rate
such as 0.3 times 5 counts as the exact half 1.5), but at least one observation for a user with a
non-empty prior set and a positive rate. `observed_sizes` applies it and `broadcast_rates` reads a
scalar or per-user rate; both, and `csr_from_blocks` (dense bool row blocks to one CSR), are
public so that `simrec.procedural`'s block samplers follow exactly the same rules.

Splits follow Lim §6 (per user, fractions of O+_u uniformly at random into train/valid/test,
repeated for several independent folds), FastML's strong generalisation (whole users held out)
and Steck's protocols (RecSys'13, §3.3: a fixed number of test ratings per active user, and
random unrated items to rank beside them).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize
import scipy.sparse as sp

from simrec import validate
from simrec.world import World, quality, quality_pairs, user_blocks

__all__ = [
    "DEFAULT_OBSERVATION_RATE", "prior_relevant", "prior_relevant_nbytes", "user_rates",
    "observe_srs", "observe_mnar_popularity", "observe_mnar_quality", "expected_observed_count",
    "calibrate_offset", "Split", "split_per_user", "UserSplit", "split_users", "split_steck",
    "sample_unrated", "observed_sizes", "broadcast_rates", "csr_from_blocks",
]

# SRS observation rate at which the paper-like world presets are calibrated (simrec.world.PRESETS).
DEFAULT_OBSERVATION_RATE = 0.5

_HALF_SLACK = 1e-9          # rounding slack: decimal fractions times counts that are exact halves


# --------------------------------------------------------------------------------------------
# Prior-relevant sets
# --------------------------------------------------------------------------------------------

@jax.jit
def _bernoulli_block(key: jax.Array, world: World, users: jax.Array) -> jax.Array:
    """bool[B, I]: U_ui < q(u, i) with U_u. ~ Uniform from fold_in(key, u) (block-free keys)."""
    row_keys = jax.vmap(lambda user: jax.random.fold_in(key, user))(users)
    uniforms = jax.vmap(lambda k: jax.random.uniform(k, (world.n_items,)))(row_keys)
    return uniforms < quality(world, users)


@jax.jit
def _threshold_block(world: World, users: jax.Array, threshold: jax.Array) -> jax.Array:
    """bool[B, I]: q(u, i) >= threshold."""
    return quality(world, users) >= threshold


def csr_from_blocks(masks: Sequence[np.ndarray], n_cols: int) -> sp.csr_matrix:
    """Stack dense bool row blocks into one bool CSR matrix (column indices sorted).

    masks: bool[B_j, n_cols] blocks, in row order.  Returns bool CSR [sum_j B_j, n_cols]."""
    counts = [m.sum(axis=1) for m in masks]
    indices = [np.nonzero(m)[1] for m in masks]
    indptr = np.concatenate([[0], np.cumsum(np.concatenate(counts))]).astype(np.int64)
    indices = np.concatenate(indices).astype(np.int32)
    return sp.csr_matrix((np.ones(len(indices), dtype=bool), indices, indptr),
                         shape=(len(indptr) - 1, n_cols))


def prior_relevant_nbytes(n_users: int, n_items: int, block_size: int) -> int:
    """Bytes `prior_relevant` holds at once before its CSR output: the dense bool rows of all
    users (U * I) and one block's f32 uniforms, matrix product and quality and its bool mask
    (13 bytes per pair of a block of min(block_size, U) users). A lower bound: the CSR built at
    the end (about 21 bytes per relevant pair while it is assembled) is not known beforehand."""
    n_users, n_items, block_size = (int(n) for n in (n_users, n_items, block_size))
    return n_users * n_items + 13 * min(block_size, n_users) * n_items


def prior_relevant(key: jax.Array, world: World, *, model: str = "bernoulli",
                   threshold: float = 0.5, block_size: int = 1024) -> sp.csr_matrix:
    """Prior-relevant sets P+ (Lim §2.1) of every user.  Returns bool CSR [U, I].

    model="bernoulli": (u, i) in P+ independently with probability q(u, i); the uniform numbers of
        user u come from fold_in(key, u), so the result does not depend on `block_size`.
    model="threshold": (u, i) in P+ iff q(u, i) >= threshold (deterministic; key unused).
    Memory: the dense bool rows of every block (U * I bytes) until the CSR is built, plus
    `prior_relevant_nbytes` per block; refused beforehand when that exceeds the available memory
    (`simrec.validate.fits_in_memory`).
    """
    validate.choice("model", model, ("bernoulli", "threshold"))
    if model == "threshold":
        validate.probability("threshold", threshold, low_open=True, high_open=True)
    validate.integer("block_size", block_size, low=1)
    validate.fits_in_memory(f"prior_relevant: P+ of {world.n_users:,} users x {world.n_items:,} items",
                            prior_relevant_nbytes(world.n_users, world.n_items, block_size))
    masks = []
    width = min(block_size, world.n_users)
    for users in user_blocks(world.n_users, block_size):
        padded = np.pad(users, (0, width - len(users)), mode="edge")        # one compiled shape
        if model == "bernoulli":
            block = _bernoulli_block(key, world, padded)
        else:
            block = _threshold_block(world, padded, jnp.float32(threshold))
        masks.append(np.asarray(block)[: len(users)])
    return csr_from_blocks(masks, world.n_items)


# --------------------------------------------------------------------------------------------
# Observation models: O+ ⊆ P+
# --------------------------------------------------------------------------------------------

def user_rates(key: jax.Array, n_users: int, mean: float, concentration: float) -> jax.Array:
    """Per-user observation rates rate_u ~ Beta(mean * c, (1 - mean) * c), c = concentration.

    E[rate_u] = mean and Var[rate_u] = mean (1 - mean) / (c + 1): a "sample of unknown size" whose
    size varies between users (Lim §2.1).  Returns f32[n_users].
    """
    validate.probability("mean", mean, low_open=True, high_open=True)
    validate.positive("concentration", concentration)
    validate.integer("n_users", n_users, low=1)
    return jax.random.beta(key, mean * concentration, (1 - mean) * concentration, (n_users,))


def _as_relevance(matrix, name: str) -> sp.csr_matrix:
    """A canonical bool CSR copy (sorted indices, no explicit zeros) of a sparse or dense 2-D
    relevance matrix, boolean or 0/1 only (`simrec.validate.relevance_mask`)."""
    return sp.csr_matrix(validate.relevance_mask(name, matrix, (None, None)))


def broadcast_rates(rate, n_users: int) -> np.ndarray:
    """f64[n_users] per-user rates from a scalar or a length-n_users array, all in [0, 1]
    (ValueError naming ``rate`` otherwise)."""
    rates = validate.probabilities("rate", rate)
    if rates.ndim == 0:
        return np.full(n_users, float(rates))
    validate.matrix_shape("rate (a scalar or one per user)", rates, (n_users,))
    return rates


def observed_sizes(counts: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """|O+_u| by the observation size rule of the module docstring, from counts i[U] = |P+_u| and
    rates f64[U] = rate_u (`broadcast_rates`).  Returns i64[U], at most counts."""
    sizes = np.floor(rates * counts + 0.5 + _HALF_SLACK).astype(np.int64)
    sizes = np.where((counts >= 1) & (rates > 0), np.maximum(sizes, 1), 0)
    return np.minimum(sizes, counts)


_UNIFORM_CHUNK = 1 << 16      # random bits are drawn in fixed-size chunks: one compiled shape


@jax.jit
def _bits_chunk(key: jax.Array, chunk: jax.Array) -> jax.Array:
    return jax.random.bits(jax.random.fold_in(key, chunk), (_UNIFORM_CHUNK, 2), jnp.uint32)


def _uniforms(key: jax.Array, n: int) -> np.ndarray:
    """f64[n] i.i.d. Uniform(0, 1) with 53 random bits each (never 0 or 1, ties negligible).

    Entry j comes from chunk j // 2^16 drawn with fold_in(key, chunk), so it depends on (key, j)
    only, and every call reuses one compiled shape.
    """
    n_chunks = -(-n // _UNIFORM_CHUNK)
    bits = np.concatenate([np.asarray(_bits_chunk(key, chunk)) for chunk in range(n_chunks)]
                          or [np.zeros((0, 2), np.uint32)])[:n].astype(np.uint64)
    mantissa = (bits[:, 0] << np.uint64(21)) | (bits[:, 1] >> np.uint64(11))
    return (mantissa.astype(np.float64) + 0.5) * 2.0 ** -53


def _entry_rows(matrix: sp.csr_matrix) -> np.ndarray:
    """i64[nnz]: the row of each stored entry of a CSR matrix."""
    return np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))


def _row_positions(matrix: sp.csr_matrix, scores: np.ndarray) -> np.ndarray:
    """i64[nnz]: 0-based position of each stored entry within its row by descending score."""
    rows = _entry_rows(matrix)
    order = np.lexsort((-scores, rows))
    positions = np.empty(len(scores), dtype=np.int64)
    positions[order] = np.arange(len(scores)) - matrix.indptr[rows[order]]
    return positions


def _keep_entries(matrix: sp.csr_matrix, keep: np.ndarray, *,
                  values: bool = False) -> sp.csr_matrix:
    """The CSR matrix holding the stored entries of `matrix` where keep[nnz] is True: bool, or
    with their stored values when `values`."""
    counts = np.bincount(_entry_rows(matrix)[keep], minlength=matrix.shape[0])
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    data = matrix.data[keep] if values else np.ones(int(keep.sum()), dtype=bool)
    return sp.csr_matrix((data, matrix.indices[keep], indptr), shape=matrix.shape)


def _sample_within_rows(key: jax.Array, prior: sp.csr_matrix, rate,
                        log_weights: np.ndarray | None) -> sp.csr_matrix:
    """Per row, `observed_sizes` entries drawn without replacement with probability
    proportional to exp(log_weights) at each draw (Gumbel-top-k; uniform if log_weights is None).
    """
    sizes = observed_sizes(np.diff(prior.indptr), broadcast_rates(rate, prior.shape[0]))
    uniforms = _uniforms(key, prior.nnz)
    scores = -np.log(-np.log(uniforms))                      # Gumbel(0, 1)
    if log_weights is not None:
        scores = scores + log_weights
    return _keep_entries(prior, _row_positions(prior, scores) < sizes[_entry_rows(prior)])


def observe_srs(key: jax.Array, prior, rate) -> sp.csr_matrix:
    """Observed sets O+ as simple random samples of P+ (Lim §2.1).  Returns bool CSR [U, I].

    prior: bool [U, I] (sparse or dense).  rate: scalar or f32[U] in [0, 1].
    For each user, O+_u is a uniformly random subset of P+_u of the size given by the rule in the
    module docstring: every subset of that size is equally likely (the items are ordered by
    i.i.d. 53-bit uniforms and the first ones kept).
    """
    return _sample_within_rows(key, _as_relevance(prior, "prior"), rate, None)


def observe_mnar_popularity(key: jax.Array, prior, rate, beta: float, popularity) -> sp.csr_matrix:
    """Popularity-biased observation (MNAR): O+_u ⊆ P+_u favours popular items.

    The size of O+_u is exactly that of `observe_srs`; the items are drawn from P+_u without
    replacement, each draw choosing item i with probability proportional to popularity_i ** beta
    among the items not yet drawn (successive sampling, done as Gumbel-top-k over
    beta * log popularity_i). beta = 0 is exactly `observe_srs` (same key, same output);
    beta > 0 over-samples popular items, beta < 0 under-samples them.

    popularity: f[I], finite and > 0 (e.g. item counts + 1).  Returns bool CSR [U, I].
    """
    prior = _as_relevance(prior, "prior")
    validate.finite("beta", beta)
    popularity = validate.finite_values("popularity", popularity).astype(np.float64)
    validate.matrix_shape("popularity (one per item)", popularity, (prior.shape[1],))
    if not np.all(popularity > 0):
        raise ValueError("popularity must be finite and > 0 (add 1 to raw counts)")
    return _sample_within_rows(key, prior, rate, beta * np.log(popularity)[prior.indices])


def observe_mnar_quality(key: jax.Array, prior, rate, beta: float, world: World) -> sp.csr_matrix:
    """Quality-biased observation (MNAR): O+_u ⊆ P+_u favours items of high true quality.

    As `observe_mnar_popularity` with per-pair weight q(u, i) ** beta (q from `world`, floored at
    the smallest positive float32 so that log q is finite): users consume their best-liked
    relevant items first. beta = 0 is exactly `observe_srs`.  Returns bool CSR [U, I].
    """
    prior = _as_relevance(prior, "prior")
    validate.finite("beta", beta)
    validate.matrix_shape("prior (the world's users x items)", prior, (world.n_users, world.n_items))
    rows = _entry_rows(prior).astype(np.int32)
    pair_quality = np.asarray(quality_pairs(world, rows, prior.indices), dtype=np.float64)
    log_quality = np.log(np.maximum(pair_quality, np.finfo(np.float32).tiny))
    return _sample_within_rows(key, prior, rate, beta * log_quality)


# --------------------------------------------------------------------------------------------
# Expected observed counts and calibration of a world's density
# --------------------------------------------------------------------------------------------

def _rational_rate(rate: float) -> Fraction:
    """rate as a fraction a/b with b <= 64 (needed for the exact expectation)."""
    rate = validate.probability("rate", rate)
    fraction = Fraction(rate).limit_denominator(64)
    if abs(float(fraction) - rate) > 1e-12:
        raise ValueError(f"rate must be a fraction a/b with b <= 64 (e.g. 0.5, 0.3, 1/3) for the "
                         f"exact expectation, got {rate!r}")
    return fraction


def _expected_sizes(q: np.ndarray, rate: Fraction) -> np.ndarray:
    """f64[B]: E|O+_u| for prior sizes X_u = sum_i Bernoulli(q[u, i]) and the size rule.

    With rate = a/b and g(k) = floor(a k / b + 1/2) (plus 1 when that is 0 and k >= 1):
        E g(X) = (2 a E X + b - E[(2 a (X mod b) + b) mod 2b]) / (2b) + sum_{1<=k<b/2a} P(X = k),
    where P(X ≡ m mod b) = (1/b) sum_l w^(-lm) prod_i (1 - q_i + q_i w^l), w = exp(2 pi i / b),
    and P(X = k) for the few small k comes from the exact dynamic programme over items.
    """
    a, b = rate.numerator, rate.denominator
    if a == 0:
        return np.zeros(q.shape[0])
    roots = np.exp(2j * np.pi * np.arange(b) / b)
    generating = np.ones((q.shape[0], b), dtype=np.complex128)                        # [B, b]
    for power in range(1, b // 2 + 1):           # w^(b - l) = conj(w^l); w^(b/2) = -1 is real
        if 2 * power == b:
            generating[:, power] = np.prod(1 - 2 * q, axis=1)
        else:
            generating[:, power] = np.prod(1 - q + q * roots[power], axis=1)
            generating[:, b - power] = np.conj(generating[:, power])
    residues = np.arange(b)
    residue_prob = (generating @ roots[:, None] ** -residues[None, :]).real / b       # [B, b]
    residue_term = residue_prob @ ((2 * a * residues + b) % (2 * b))
    sizes = (2 * a * q.sum(axis=1) + b - residue_term) / (2 * b)
    n_small = (b - 1) // (2 * a)                 # k >= 1 with floor(a k / b + 1/2) = 0
    if n_small:
        pmf = np.zeros((q.shape[0], n_small + 1))
        pmf[:, 0] = 1.0
        for column in q.T:                       # P(X = k), k <= n_small, one item at a time
            pmf[:, 1:] = pmf[:, 1:] * (1 - column[:, None]) + pmf[:, :-1] * column[:, None]
            pmf[:, 0] *= 1 - column
        sizes = sizes + pmf[:, 1:].sum(axis=1)
    return sizes


def expected_observed_count(world: World, rate: float = DEFAULT_OBSERVATION_RATE, *,
                            users=None, block_size: int = 64) -> float:
    """Exact E[sum_u |O+_u|] under Bernoulli prior sets and the SRS size rule (any observation
    model here gives the same sizes).

    rate: a scalar a/b with b <= 64 (the expectation is exact in that case; see `_expected_sizes`).
    users: optional i32[n] subset of users to sum over (default: all).  Works in user blocks,
    O(block_size * I) memory, float64 arithmetic.
    """
    fraction = _rational_rate(rate)
    if users is None:
        users = np.arange(world.n_users, dtype=np.int32)
    users = validate.indices("users", users, world.n_users, "users in the world")
    if users.ndim != 1 or users.size == 0:
        raise ValueError(f"users must be a non-empty 1-D array of user indices, got shape "
                         f"{users.shape}")
    total = 0.0
    for block in user_blocks(len(users), block_size):
        q = np.asarray(quality(world, users[block]), dtype=np.float64)
        total += float(_expected_sizes(q, fraction).sum())
    return total


def calibrate_offset(world: World, target: float, rate: float = DEFAULT_OBSERVATION_RATE, *,
                     bracket: tuple[float, float] = (-30.0, 10.0), xtol: float = 1e-4,
                     users=None) -> float:
    """The offset c solving expected_observed_count(world with offset c, rate) = target.

    The expectation increases strictly with c (every q(u, i) does, and the size rule is
    monotone), so Brent's method on the bracket finds the unique root to within `xtol`.
    users: optional subset over which the expectation is taken (target then refers to it).
    """
    validate.positive("target", target)

    def excess(offset: float) -> float:
        shifted = dataclasses.replace(world, offset=jnp.float32(offset))
        return expected_observed_count(shifted, rate, users=users) - target

    low, high = bracket
    if not excess(low) < 0 < excess(high):
        raise ValueError(f"bracket {bracket} does not enclose the target {target}; widen it")
    return float(scipy.optimize.brentq(excess, low, high, xtol=xtol))


# --------------------------------------------------------------------------------------------
# Splits
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Split:
    """One per-user split of the observed sets: disjoint bool CSR [U, I] whose union is O+."""
    train: sp.csr_matrix
    valid: sp.csr_matrix
    test: sp.csr_matrix

    def __post_init__(self):
        if not self.train.shape == self.valid.shape == self.test.shape:
            raise ValueError(f"Split parts must share a shape, got train {self.train.shape}, "
                             f"valid {self.valid.shape}, test {self.test.shape}")


def split_per_user(key: jax.Array, observed, fractions: Sequence[float] = (0.7, 0.1, 0.2),
                   n_folds: int = 4) -> list[Split]:
    """Independent per-user random splits of O+ into train/valid/test (Lim §6: 70/10/20, four
    folds).  Returns n_folds `Split`s; fold f uses fold_in(key, f).

    For a user with n = |O+_u| items in uniformly random order, with cumulative fractions
    F1 = f_train, F2 = f_train + f_valid, the first floor(n F1 + 1/2) items go to train, those up
    to floor(n F2 + 1/2) to valid and the rest to test (halves round up). The parts are disjoint,
    their union is O+_u, and each part's size is within one of its fraction times n.
    fractions: (train, valid, test), each >= 0 with train > 0, summing to 1.
    """
    observed = _as_relevance(observed, "observed")
    fractions = tuple(float(f) for f in fractions)
    if len(fractions) != 3 or not all(math.isfinite(f) and f >= 0 for f in fractions) \
            or fractions[0] <= 0 or abs(sum(fractions) - 1) > 1e-9:
        raise ValueError(f"fractions must be (train, valid, test), each >= 0 with train > 0, "
                         f"summing to 1; got {fractions}")
    n_folds = validate.integer("n_folds", n_folds, low=1)
    counts = np.diff(observed.indptr).astype(np.float64)
    train_end = np.floor(counts * fractions[0] + 0.5 + _HALF_SLACK)
    valid_end = np.floor(counts * (fractions[0] + fractions[1]) + 0.5 + _HALF_SLACK)
    rows = _entry_rows(observed)
    splits = []
    for fold in range(n_folds):
        uniforms = _uniforms(jax.random.fold_in(key, fold), observed.nnz)
        positions = _row_positions(observed, uniforms)
        in_train = positions < train_end[rows]
        in_valid = ~in_train & (positions < valid_end[rows])
        splits.append(Split(train=_keep_entries(observed, in_train),
                            valid=_keep_entries(observed, in_valid),
                            test=_keep_entries(observed, ~in_train & ~in_valid)))
    return splits


@dataclass(frozen=True)
class UserSplit:
    """Strong-generalisation split: whole users held out (FastML, "Evaluating recommender
    systems"). `train` and `held_out` are the rows of O+ of `train_users` and `held_out_users`
    (sorted user indices, disjoint, together all users)."""
    train: sp.csr_matrix              # bool [U_train, I]
    held_out: sp.csr_matrix           # bool [U_held, I]
    train_users: np.ndarray           # i64[U_train]
    held_out_users: np.ndarray        # i64[U_held]


def split_users(key: jax.Array, observed, held_out_fraction: float) -> UserSplit:
    """Hold out round(held_out_fraction * U) users chosen uniformly at random (at least one, and
    at least one user left for training).  Returns a `UserSplit`."""
    observed = _as_relevance(observed, "observed")
    n_users = observed.shape[0]
    validate.probability("held_out_fraction", held_out_fraction, low_open=True, high_open=True)
    if n_users < 2:
        raise ValueError(f"observed must have at least 2 users to hold some out, got {n_users}")
    n_held = min(max(math.floor(held_out_fraction * n_users + 0.5), 1), n_users - 1)
    permutation = np.asarray(jax.random.permutation(key, n_users))
    held_out_users = np.sort(permutation[:n_held]).astype(np.int64)
    train_users = np.sort(permutation[n_held:]).astype(np.int64)
    return UserSplit(train=observed[train_users], held_out=observed[held_out_users],
                     train_users=train_users, held_out_users=held_out_users)


def split_steck(key: jax.Array, ratings, *, min_ratings: int = 20, n_test: int = 10
                ) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Steck's split for ranking the rated test items (RecSys'13, §3.3, Table 1 (b)): only users
    with at least `min_ratings` ratings are kept; of each, `n_test` ratings chosen uniformly at
    random go to the test set and the rest to the training set.

    ratings: [U, I] numbers (scipy.sparse or dense; stored non-zero entries are the ratings, 0 =
    unrated). Returns (train, test), CSR [U, I] of ratings' values with sorted indices: disjoint,
    together exactly the ratings of the kept users; a user with fewer than `min_ratings` ratings
    has empty rows in both. Entry j of the ratings (row-major) is ordered by the j-th uniform of
    `key`, so the split depends on (key, ratings) only.
    n_test >= 1 and min_ratings > n_test (every kept user keeps a training rating).
    """
    n_test = validate.integer("n_test", n_test, low=1)
    min_ratings = validate.integer("min_ratings", min_ratings, low=1)
    if min_ratings <= n_test:
        raise ValueError(f"min_ratings must exceed n_test so that every kept user keeps a "
                         f"training rating, got min_ratings={min_ratings}, n_test={n_test}")
    matrix = sp.csr_matrix(ratings, dtype=np.float64, copy=True)
    validate.finite_values("ratings", matrix.data)
    matrix.sum_duplicates()
    matrix.eliminate_zeros()
    matrix.sort_indices()
    rows = _entry_rows(matrix)
    kept = (np.diff(matrix.indptr) >= min_ratings)[rows]
    positions = _row_positions(matrix, _uniforms(key, matrix.nnz))
    in_test = kept & (positions < n_test)
    return (_keep_entries(matrix, kept & ~in_test, values=True),
            _keep_entries(matrix, in_test, values=True))


def sample_unrated(key: jax.Array, rated, n: int) -> sp.csr_matrix:
    """Per user, n items drawn uniformly without replacement from those outside `rated` (all of
    them when fewer): Steck's protocol (a) ranks a random 1,000 unrated items beside the user's
    rated test items (RecSys'13, §3.3).

    rated: bool [U, I] (sparse or dense), every item the user has rated. Returns bool CSR [U, I]
    with sorted indices, disjoint from `rated`. Item i of user u is ordered by the (u·I + i)-th
    uniform of `key`, so the draw depends on (key, rated, n) only. O(U·I) time and memory: 32
    bytes per (user, item) pair at the peak (the 53-bit uniforms as they are assembled), refused
    beforehand when that exceeds the available memory (`simrec.validate.fits_in_memory`).
    """
    rated = _as_relevance(rated, "rated")
    n = validate.integer("n", n, low=1)
    n_users, n_items = rated.shape
    validate.fits_in_memory(f"sample_unrated: uniforms for {n_users:,} users x {n_items:,} items",
                            32 * n_users * n_items)
    scores = _uniforms(key, n_users * n_items).reshape(n_users, n_items)
    scores[_entry_rows(rated), rated.indices] = np.inf          # rated items are never drawn
    if n < n_items:
        cut = np.partition(scores, n - 1, axis=1)[:, n - 1:n]      # the n-th smallest per user
        chosen = (scores <= cut) & np.isfinite(scores)
    else:
        chosen = np.isfinite(scores)
    return sp.csr_matrix(chosen)
