"""Steck's (RecSys'13) rated-items protocol, shared by the studies ``protocols`` and ``coat``: rank
only the items each user rated in the test data."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def exclude_unrated(test: sp.csr_matrix) -> np.ndarray:
    """The exclusion of a protocol that ranks only each user's rated items (Steck's (b)): every
    item without a rating in test (CSR [U, I]), bool[U, I]; a user without ratings keeps every
    item (nothing of theirs is relevant, so their metrics are NaN and skipped, while excluding
    every item would make the ranking undefined)."""
    rated = test.astype(bool)
    return ~rated.toarray() & (np.diff(rated.indptr) > 0)[:, None]
