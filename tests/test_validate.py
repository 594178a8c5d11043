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


# --------------------------------------------------------------------------------------------
# Numbers, counts, real arrays and exposure tables
# --------------------------------------------------------------------------------------------

def test_numbers_accepts_scalars_and_vectors_in_the_interval():
    np.testing.assert_array_equal(validate.numbers("m", [1, 2.5, math.inf], low=1.0, inf=True), [1, 2.5, math.inf])
    assert validate.numbers("m", np.float32(3), low=1.0).shape == ()
    assert validate.numbers("m", jnp.array([1.0, 2.0]), low=1.0).dtype == np.float64


@pytest.mark.parametrize("value, error, message", [
    (True, ArgumentTypeError, r"m must be a number >= 1 or inf \(or an array of them\), got True \(bool\)"),
    (np.bool_(True), ArgumentTypeError, r"got True \(bool\)"),
    ([2.0, True], ArgumentTypeError, r"got \[2.0, True\] \(list\)"),       # numpy would make it [2, 1]
    (np.array([True, False]), ArgumentTypeError, "must be a number >= 1 or inf"),
    (0.5, ValueError, r"m must be a number >= 1 or inf \(or an array of them\), got 0.5$"),
    ([1.0, math.nan], ValueError, r"found nan at index \(1,\)"),
    (-math.inf, ValueError, "got -inf"),
    ("2", ArgumentTypeError, r"got '2' \(str\)"),
    (None, ArgumentTypeError, "got None"),
    (2 + 1j, ArgumentTypeError, r"\.real"),
    ([[1.0], [2.0, 3.0]], ValueError, "ragged nested list"),
])
def test_numbers_rejects_bools_nan_and_out_of_range_values(value, error, message):
    with pytest.raises(error, match=message):
        validate.numbers("m", value, low=1.0, inf=True)


def test_numbers_rejects_inf_unless_allowed():
    with pytest.raises(ValueError, match=r"x must be a number in \(0, 1\] \(or an array of them\), got inf"):
        validate.numbers("x", math.inf, low=0.0, high=1.0, low_open=True)


def test_counts_are_whole_numbers_never_truncated():
    np.testing.assert_array_equal(validate.counts("n", [3, 0]), [3, 0])
    assert validate.counts("n", np.array([2.0, 5.0])).dtype == np.int64        # whole floats pass
    assert validate.counts("n", 4).shape == ()
    with pytest.raises(ValueError, match=r"n must hold counts \(whole numbers >= 0\), found 2.7; counts "
                                         r"are never truncated: round them"):
        validate.counts("n", 2.7)
    with pytest.raises(ValueError, match=r"found 1.5 at index \(1,\)"):
        validate.counts("n", [2.0, 1.5])
    with pytest.raises(ValueError, match=r"found nan"):
        validate.counts("n", [math.nan])
    with pytest.raises(ValueError, match=r"n must hold counts \(whole numbers >= 1\), found 0"):
        validate.counts("n", 0, low=1)
    with pytest.raises(ArgumentTypeError, match=r"got True \(bool\); a bool is a flag, not a count"):
        validate.counts("n", True)
    with pytest.raises(ArgumentTypeError, match="got dtype complex128"):
        validate.counts("n", np.array([1 + 0j]))


def test_array_rules_refuse_a_bare_bool_but_keep_bool_arrays():
    """A bool array is 0/1 data; a single True where a number belongs is a mistake."""
    np.testing.assert_array_equal(validate.probabilities("rate", [True, False]), [1.0, 0.0])
    for rule in (validate.probabilities, validate.finite_values, validate.no_nan):
        with pytest.raises(ArgumentTypeError, match=r"rate must be a number or an array of numbers, got True"):
            rule("rate", True)


def test_real_array_keeps_arrays_and_converts_rectangular_lists():
    scores = jnp.ones((2, 3))
    assert validate.real_array("scores", scores, (None, None)) is scores                  # no copy
    np.testing.assert_array_equal(validate.real_array("scores", [[1, 2], [3, 4]], (2, 2)), [[1, 2], [3, 4]])
    assert validate.real_array("gains", sp.csr_matrix(np.eye(2))).format == "csr"


@pytest.mark.parametrize("value, error, message", [
    ([[0.1, 0.2], [0.3]], ValueError, r"^scores must be a 2-D array \[users, items\], got a ragged nested "
                                      r"list \(rows of different lengths\); pad the rows"),
    ([0.1, 0.2], ValueError, r"^scores must have shape \(any, any\), a 2-D array \[users, items\]; got shape \(2,\)$"),
    (np.ones((2, 2), complex), ArgumentTypeError, r"^scores must hold real numbers \(int or float, not bool\), "
                                                  r"got dtype complex128; take the real part explicitly \(\.real\)"),
    (np.ones((2, 2), bool), ArgumentTypeError, r"got dtype bool; convert it explicitly \(\.astype\(float\)\)"),
    (np.full((2, 2), "a"), ArgumentTypeError, "got dtype <U1; convert it to a numeric"),
])
def test_real_array_errors_name_the_argument_and_the_fix(value, error, message):
    with pytest.raises(error, match=message):
        validate.real_array("scores", value, (None, None), what="[users, items]", bool_ok=False)


def test_ragged_lists_are_one_line_errors_in_every_array_rule():
    ragged = [[0, 1], [1]]
    for call in (lambda: validate.relevance_mask("relevant", ragged),
                 lambda: validate.indices("users", ragged, 3, "users"),
                 lambda: validate.finite_values("x", ragged), lambda: validate.matrix_shape("x", ragged, (2, 2))):
        with pytest.raises(ValueError, match=r"must be a rectangular array, got a ragged nested list") as error:
            call()
        assert "\n" not in str(error.value)


def test_exposures_are_tables_in_the_unit_interval():
    table = np.array([[0.0, 0.5], [1.0, 1.0 + 1e-6]], np.float32)          # zeros and float32 rounding pass
    assert validate.exposures("logging_exposure", table, (2, 2)) is table
    validate.exposures("t", jnp.asarray(table))
    with pytest.raises(ValueError, match=r"^logging_exposure must be an exposure table of shape 2 x 2 \(contexts x "
                                         r"items, e\.g\. simrec\.feed\.exposure\(\.\.\.\)\.mean\), got a scalar$"):
        validate.exposures("logging_exposure", 7.0, (2, 2))
    with pytest.raises(ValueError, match=r"must have shape \(2, 3\), got shape \(2, 2\)"):
        validate.exposures("logging_exposure", table, (2, 3))
    for bad, found in ((7.0, "7.0"), (np.nan, "nan"), (-0.25, "-0.25"), (1.01, "1.01")):
        values = table.astype(np.float64)
        values[1, 0] = bad
        with pytest.raises(ValueError, match=rf"logging_exposure must hold exposures in \[0, 1\] .*found {found}\S* "
                                             r"at index \(1, 0\); pass an exposure table"):
            validate.exposures("logging_exposure", values)

    def traced(t):
        return validate.exposures("t", t)                # a tracer: the shape only

    jax.jit(traced)(jnp.full((2, 2), 7.0))


@pytest.mark.parametrize("values, message", [
    ((), "at least one"), ((1.0, 1.0), "distinct"), ((0.5, 2.0), ">= 1 or inf"),
    ((float("nan"),), ">= 1 or inf"), ((True, 2.0), "a bool is not a number"),
])
def test_clipping_values_are_distinct_numbers_at_least_one(values, message):
    with pytest.raises((ValueError, TypeError), match=message):
        validate.clipping_values("m", values)


def test_clipping_values_keep_inf_and_order():
    assert validate.clipping_values("m", (4, 1.0, float("inf"))) == (4.0, 1.0, float("inf"))
