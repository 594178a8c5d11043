"""Memory checks before dense allocations: `simrec.validate.fits_in_memory` and its callers.

Every test sets $SIMREC_MEMORY_LIMIT_GB, so the outcome does not depend on the machine's memory.
"""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

from simrec import cli, missing, procedural, validate, world
from simrec.validate import MEMORY_LIMIT_ENV, MemoryLimitError

ONE_LINE = re.compile(r"^[^\n]+ needs an estimated [0-9.,e+-]+ GB of memory, more than the limit of "
                      r"[0-9.,e+-]+ GB set by SIMREC_MEMORY_LIMIT_GB; use smaller n_users / n_items, "
                      r"or a simrec\.procedural world, which is never materialised \(computed per "
                      r"block of users\)$")


@pytest.fixture
def limit_gb(monkeypatch):
    """Set the memory limit (GB) for one test."""
    return lambda gb: monkeypatch.setenv(MEMORY_LIMIT_ENV, str(gb))


def test_fits_in_memory_returns_the_estimate_under_the_limit(limit_gb):
    limit_gb(1)
    assert validate.fits_in_memory("a table", 10**9) == 10**9
    assert validate.memory_limit() == (10**9, MEMORY_LIMIT_ENV)


def test_fits_in_memory_refuses_in_one_line_with_estimate_limit_and_fix(limit_gb):
    limit_gb(2)
    with pytest.raises(MemoryLimitError) as err:
        validate.fits_in_memory("a world of 1,000,000 users x 1,000,000 items", 10**12)
    assert str(err.value) == (
        "a world of 1,000,000 users x 1,000,000 items needs an estimated 1,000.0 GB of memory, more "
        "than the limit of 2.0 GB set by SIMREC_MEMORY_LIMIT_GB; use smaller n_users / n_items, or a "
        "simrec.procedural world, which is never materialised (computed per block of users)")
    assert isinstance(err.value, MemoryError)


def test_without_the_variable_the_limit_is_the_available_memory(monkeypatch):
    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    limit, source = validate.memory_limit()
    assert limit > 0 and source in ("MemAvailable", "physical memory")
    with pytest.raises(MemoryLimitError, match=rf"available \({source}; SIMREC_MEMORY_LIMIT_GB overrides it\)"):
        validate.fits_in_memory("everything", 10**18)            # an exabyte


@pytest.mark.parametrize("text", ["lots", "-1", "nan", "inf"])
def test_a_bad_limit_variable_is_named(limit_gb, text):
    limit_gb(text)
    with pytest.raises(ValueError, match="SIMREC_MEMORY_LIMIT_GB must be a finite number of GB >= 0"):
        validate.fits_in_memory("a table", 1)


@pytest.mark.parametrize("nbytes", [-1, 1.5, True, "10"])
def test_nbytes_must_be_a_count(limit_gb, nbytes):
    limit_gb(1)
    with pytest.raises(ValueError, match="nbytes must be an integer >= 0"):
        validate.fits_in_memory("a table", nbytes)


def test_the_estimates_count_the_arrays_held_at_once():
    assert world.world_nbytes(60, 40, 4) == 4 * ((60 + 40) * 4 + 60 + 3 * 40)
    # the dense bool rows of every user, and one block of f32 uniforms, product, quality, bool mask
    assert missing.prior_relevant_nbytes(5000, 300, 1024) == 5000 * 300 + 13 * 1024 * 300
    assert missing.prior_relevant_nbytes(10, 300, 1024) == 10 * 300 + 13 * 10 * 300


TINY = world.WorldConfig(n_users=60, n_items=40, dim=4, offset=-2.0)


REFUSED = ("make_world", "quality", "quality_logit", "prior_relevant", "sample_unrated",
           "procedural.materialise", "procedural.score_function", "procedural.quality",
           "procedural.prior_relevant", "procedural.prior_relevant_block",
           "procedural.observe_srs_block")


@pytest.fixture(scope="module")
def calls():
    """{name: (what its message starts with, call)} of every guarded allocation, on a 60 x 40
    world or its procedural twin (built here, under the machine's own limit)."""
    w = world.make_world(jax.random.key(0), TINY)
    p = procedural.make_procedural(jax.random.key(0), TINY)
    users = np.arange(60, dtype=np.int32)
    rated = sp.csr_matrix(np.eye(60, 40, dtype=bool))
    block = np.zeros((60, 40), bool)
    key = jax.random.key(1)
    return {
        "make_world": ("make_world", lambda: world.make_world(jax.random.key(0), TINY)),
        "quality": ("quality", lambda: world.quality(w, users)),
        "quality_logit": ("quality_logit", lambda: world.quality_logit(w, users)),
        "prior_relevant": ("prior_relevant", lambda: missing.prior_relevant(key, w)),
        "sample_unrated": ("sample_unrated", lambda: missing.sample_unrated(key, rated, 5)),
        "procedural.materialise": ("materialise", lambda: procedural.materialise(p)),
        "procedural.score_function": ("score_function", lambda: procedural.score_function(p)),
        "procedural.quality": ("quality block", lambda: procedural.quality(p, users)),
        "procedural.prior_relevant": ("prior_relevant", lambda: procedural.prior_relevant(key, p)),
        "procedural.prior_relevant_block": ("prior_relevant_block",
                                            lambda: procedural.prior_relevant_block(key, p, users)),
        "procedural.observe_srs_block": ("observe block",
                                         lambda: procedural.observe_srs_block(key, users, block, 0.5)),
    }


@pytest.mark.parametrize("name", REFUSED)
def test_every_dense_allocation_is_refused_beforehand_in_one_line(limit_gb, calls, name):
    start, call = calls[name]
    limit_gb(1e-7)                           # 100 bytes: less than any of them needs
    with pytest.raises(MemoryLimitError) as err:
        call()
    assert str(err.value).startswith(start) and ONE_LINE.match(str(err.value))


def test_a_small_world_works_under_a_limit_it_fits(limit_gb):
    limit_gb(0.01)                           # 10 MB: a 60 x 40 world and its P+ need a few kB
    w = world.make_world(jax.random.key(0), TINY)
    prior = missing.prior_relevant(jax.random.key(1), w)
    assert prior.shape == (60, 40) and prior.nnz > 0
    assert world.quality(w, np.arange(60)).shape == (60, 40)
    p = procedural.make_procedural(jax.random.key(0), TINY)
    assert procedural.materialise(p).n_users == 60


def test_the_check_stays_out_of_jitted_code(limit_gb):
    w = world.make_world(jax.random.key(0), TINY)
    limit_gb(0)                              # refuses any concrete block, never a traced one
    traced = jax.jit(lambda users: world.quality(w, users))(jnp.arange(60))
    assert traced.shape == (60, 40)


def test_the_command_prints_the_refusal_as_one_line(limit_gb, tmp_path, capsys):
    limit_gb(100)
    code = cli.main(["run", "unbiasedness", "--preset", "smoke", "--set", "world.n_users=1000000",
                     "--set", "world.n_items=1000000", "--out", str(tmp_path / "huge"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("simrec: error: ")
    message = err.strip().removeprefix("simrec: error: ")
    assert message.startswith("unbiasedness: the noisy oracle of 1,000,000 users x 1,000,000 items")
    assert "needs an estimated 16,000.0 GB" in message and ONE_LINE.match(message)
    assert not (tmp_path / "huge").exists()
