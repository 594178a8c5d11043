"""simrec.validate: one rule per concept, each error naming the argument, what it got and the fix."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

from simrec import validate
from simrec.validate import ArgumentTypeError


def test_a_type_error_is_also_a_value_error():
    with pytest.raises(TypeError):
        validate.integer("k", 2.5)
    with pytest.raises(ValueError):
        validate.integer("k", 2.5)


@pytest.mark.parametrize("value", [3, np.int64(3), np.uint8(3), np.array(3), jnp.int32(3)])
def test_integer_accepts_python_numpy_and_0d_integers(value):
    got = validate.integer("k", value, low=1, high=3)
    assert got == 3 and type(got) is int


@pytest.mark.parametrize("value, message", [
    (True, r"k must be an integer >= 1, got True \(bool\)"),
    (np.bool_(True), "got True"),
    (3.0, r"got 3.0 \(float\); pass 3"),
    (np.float32(2.5), "got 2.5"),
    ("3", "got '3' \\(str\\)"),
    (None, "got None"),
    (np.array([1, 2]), r"an array of shape \(2,\)"),
])
def test_integer_rejects_other_types(value, message):
    with pytest.raises(ArgumentTypeError, match=message):
        validate.integer("k", value, low=1)


def test_integer_bounds():
    assert validate.integer("n", 0, low=0) == 0
    with pytest.raises(ValueError, match=r"^k must be an integer >= 1, got 0$"):
        validate.integer("k", 0, low=1)
    with pytest.raises(ValueError, match=r"signal must be an integer in \[0, 1\], got 2"):
        validate.integer("signal", 2, low=0, high=1)
    with pytest.raises(ValueError, match=r"must be an integer <= 5"):
        validate.integer("k", 6, high=5)
    with pytest.raises(ValueError):
        jax.jit(lambda x: validate.integer("k", x))(3)          # a tracer is not a concrete integer


def test_finite_positive_and_probability():
    assert validate.finite("x", 2) == 2.0 and type(validate.finite("x", np.float32(0.5))) is float
    assert validate.finite("x", jnp.float32(-1.5)) == -1.5
    assert validate.positive("l2", 1e-9) == 1e-9
    assert validate.probability("p", 0) == 0.0 and validate.probability("p", 1) == 1.0
    assert validate.in_unit_interval is validate.probability
    for value in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match="x must be a finite number"):
            validate.finite("x", value)
    with pytest.raises(ValueError, match=r"l2 must be a finite number > 0, got 0"):
        validate.positive("l2", 0)
    with pytest.raises(ValueError, match=r"eps must be a finite number in \[0, 1\], got 1.5"):
        validate.probability("eps", 1.5)
    with pytest.raises(ValueError, match=r"mean must be a finite number in \(0, 1\), got 1"):
        validate.probability("mean", 1, low_open=True, high_open=True)
    with pytest.raises(ValueError, match=r"in \[0, 1\), got 1.0"):
        validate.probability("p", 1.0, high_open=True)
    with pytest.raises(ValueError, match=r">= 0"):
        validate.finite("scale", -1, low=0.0)
    for value in (True, "0.5", None, [0.5], np.ones(2)):
        with pytest.raises(ArgumentTypeError, match="p must be a finite number"):
            validate.probability("p", value)


def test_choice_compares_type_and_value():
    assert validate.choice("ideal", "all viewed", ("same discount", "all viewed")) == "all viewed"
    with pytest.raises(ValueError, match=r"model must be one of 'bernoulli', 'threshold'; got 'poisson'"):
        validate.choice("model", "poisson", ("bernoulli", "threshold"))
    with pytest.raises(ValueError):
        validate.choice("k", True, (1, 2))
    with pytest.raises(ValueError):
        validate.choice("policy", np.array(["raise"]), ("raise",))


def test_array_rules():
    np.testing.assert_array_equal(validate.no_nan("x", [1.0, np.inf]), [1.0, np.inf])
    with pytest.raises(ValueError, match=r"x contains NaN \(found nan at index \(1, 0\)\)"):
        validate.no_nan("x", np.array([[1.0], [np.nan]]))
    with pytest.raises(ValueError, match=r"x contains ±inf .*found inf at index \(2,\)"):
        validate.finite_values("x", [0.0, 1.0, np.inf])
    with pytest.raises(ValueError, match="x contains NaN"):
        validate.finite_values("x", [np.inf, np.nan])
    assert validate.probabilities("q", jnp.array([0.0, 0.5, 1.0])).dtype == np.float64
    with pytest.raises(ValueError, match=r"q must hold probabilities in \[0, 1\] \(no NaN\), found 1.5 at index \(1,\)"):
        validate.probabilities("q", [0.5, 1.5])
    with pytest.raises(ValueError, match="found nan"):
        validate.probabilities("q", [np.nan])
    with pytest.raises(ArgumentTypeError, match="q must hold real numbers, got dtype <U1"):
        validate.probabilities("q", ["a"])


def test_matrix_shape_and_indices():
    assert validate.matrix_shape("rate", np.zeros(4), (4,)) == (4,)
    assert validate.matrix_shape("m", sp.csr_matrix((2, 3)), (None, 3)) == (2, 3)
    with pytest.raises(ValueError, match=r"rate must have shape \(3,\), got shape \(4,\)"):
        validate.matrix_shape("rate", np.zeros(4), (3,))
    with pytest.raises(ValueError, match=r"prior must have shape \(any, any\), got shape \(5,\)"):
        validate.matrix_shape("prior", np.zeros(5), (None, None))
    np.testing.assert_array_equal(validate.indices("users", [0, 59], 60, "users"), [0, 59])
    with pytest.raises(ValueError, match=r"users must hold ids in \[0, 60\) \(60 users\), found 60 at index \(1,\)"):
        validate.indices("users", np.array([0, 60]), 60, "users")
    with pytest.raises(ValueError, match="found -1"):
        validate.indices("users", [-1], 60, "users")
    with pytest.raises(ArgumentTypeError, match="integer ids"):
        validate.indices("users", [0.0], 60, "users")


def test_table_rows_checks_shapes_also_of_tracers_and_shape_structs():
    validate.table_rows("q", np.zeros((2, 5)), 2, "contexts")
    with pytest.raises(ValueError, match=r"q has 1 row\(s\) but is indexed by 2 contexts; pass a table of "
                                         r"shape \(2, \.\.\.\), one row for each"):
        validate.table_rows("q", np.zeros((1, 5)), 2, "contexts")
    with pytest.raises(ValueError, match="it is a scalar"):
        validate.table_rows("q", np.float32(1), 2, "contexts")
    with pytest.raises(ValueError, match="3 row"):
        validate.table_rows("q", jax.ShapeDtypeStruct((3, 5), jnp.float32), 2, "contexts")

    def traced(table):
        validate.table_rows("q", table, 4, "contexts")
        return table

    with pytest.raises(ValueError, match="q has 2 row"):
        jax.jit(traced)(jnp.zeros((2, 3)))


def test_is_concrete_and_has_shape():
    assert validate.is_concrete(1.0) and validate.is_concrete(np.zeros(2)) and validate.is_concrete(jnp.ones(2))
    assert not validate.is_concrete(True) and not validate.is_concrete(object()) and not validate.is_concrete(None)
    assert validate.has_shape(np.zeros(2)) and validate.has_shape(jax.ShapeDtypeStruct((2,), jnp.float32))
    assert not validate.has_shape(object()) and not validate.has_shape(None)
    jax.jit(lambda x: (validate.is_concrete(x) and 1 / 0) or x)(1.0)   # a tracer is not concrete


# --------------------------------------------------------------------------------------------
# Relevance: boolean or 0/1 only
# --------------------------------------------------------------------------------------------

DENSE = np.array([[0, 1, 1], [1, 0, 0]])


@pytest.mark.parametrize("make", [
    lambda d: d.astype(bool), lambda d: d, lambda d: d.astype(np.float32), lambda d: jnp.asarray(d),
    lambda d: [list(row) for row in d],
])
def test_relevance_mask_dense(make):
    mask = validate.relevance_mask("relevant", make(DENSE), (2, 3))
    assert isinstance(mask, np.ndarray) and mask.dtype == bool
    np.testing.assert_array_equal(mask, DENSE.astype(bool))


def test_relevance_mask_sparse_keeps_sparse_and_canonicalises():
    """Duplicates summed (1 + 0 stays 1), explicit zeros dropped, indices sorted."""
    coo = sp.coo_matrix((np.array([1.0, 0.0, 1.0, 0.0]), (np.array([0, 0, 1, 1]), np.array([2, 2, 0, 1]))),
                        shape=(2, 3))
    mask = validate.relevance_mask("relevant", coo)
    assert sp.isspmatrix_csr(mask) and mask.dtype == bool and mask.has_sorted_indices and mask.nnz == 2
    np.testing.assert_array_equal(mask.toarray(), [[False, False, True], [True, False, False]])
    assert validate.relevance_mask("relevant", sp.csr_matrix(DENSE.astype(bool))).nnz == 3


@pytest.mark.parametrize("values, found", [
    (np.array([[0.0, 4.0]]), "4.0"), (np.array([[0, 2]]), "2"), (np.array([[-1, 1]]), "-1"),
    (np.array([[0.5, 1.0]]), "0.5"), (np.array([[np.nan, 1.0]]), "nan"),
    (sp.csr_matrix(np.array([[0.0, 3.5]])), "3.5"),
    (sp.csr_matrix((np.ones(2), (np.zeros(2, int), np.ones(2, int))), shape=(1, 2)), "2.0"),  # 1 + 1
])
def test_relevance_mask_rejects_anything_but_01_and_points_to_binarise(values, found):
    with pytest.raises(ValueError) as error:
        validate.relevance_mask("relevant", values)
    message = str(error.value)
    assert message.startswith("relevant must be boolean (or 0/1)") and f"found {found}" in message
    assert "simrec.data.binarize" in message and "(matrix > 0)" in message


def test_relevance_mask_rejects_wrong_types_and_shapes():
    with pytest.raises(ArgumentTypeError, match="got dtype <U1"):
        validate.relevance_mask("relevant", np.array([["a"]]))
    with pytest.raises(ArgumentTypeError, match="numpy, JAX or scipy.sparse"):
        validate.relevance_mask("relevant", {"a": 1})
    with pytest.raises(ValueError, match=r"relevant must have shape \(3, any\), got shape \(2, 3\)"):
        validate.relevance_mask("relevant", DENSE, (3, None))
