import gzip
import itertools
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from simrec import data as data_module
from simrec.data import (COAT_FILES, DataError, Interactions, binarize, densify_top, filter_min_counts,
                         filter_ratings, item_index, load_coat, load_interactions, user_index)
from simrec.datafiles import data_root

REAL_RATINGS = (Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "ml-latest-small"
                / "ratings.csv")

# (user, item, rating, timestamp) rows shared by the format fixtures; ids deliberately unsorted
ROWS = [(3, 10, 4.0, 100), (1, 20, 2.5, 101), (3, 20, 5.0, 102), (7, 10, 1.0, 103),
        (1, 30, 4.5, 104)]


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _entries(data: Interactions) -> set:
    """{(user id, item id, rating, timestamp or None)} read back through the id maps."""
    coo = data.ratings.tocoo()
    order = np.lexsort((coo.col, coo.row))           # CSR entry order = timestamps order
    stamps = data.timestamps if data.timestamps is not None else [None] * data.ratings.nnz
    return {(data.user_ids[coo.row[k]].item(), data.item_ids[coo.col[k]].item(),
             float(coo.data[k]), None if stamps[j] is None else int(stamps[j]))
            for j, k in enumerate(order)}


@pytest.mark.parametrize("name, text", [
    ("ratings.csv", "userId,movieId,rating,timestamp\n"
     + "".join(f"{u},{i},{r},{t}\n" for u, i, r, t in ROWS)),
    ("u.data", "".join(f"{u}\t{i}\t{r}\t{t}\n" for u, i, r, t in ROWS)),
    ("ratings.dat", "".join(f"{u}::{i}::{r}::{t}\n" for u, i, r, t in ROWS)),
])
def test_movielens_formats_round_trip(tmp_path, name, text):
    data = load_interactions(_write(tmp_path, name, text))
    assert data.ratings.shape == (3, 3) and data.ratings.dtype == np.float32
    assert list(data.user_ids) == [1, 3, 7] and list(data.item_ids) == [10, 20, 30]
    assert _entries(data) == set(ROWS)
    dense = data.ratings.toarray()
    assert dense[user_index(data, 3), item_index(data, 20)] == 5.0
    assert dense[user_index(data, 7), item_index(data, 30)] == 0.0


def test_generic_csv_two_columns_gets_unit_ratings_and_text_ids(tmp_path):
    path = _write(tmp_path, "clicks.csv", "user,item\nbob,x\nalice,y\nbob,y\n")
    data = load_interactions(path)
    assert list(data.user_ids) == ["alice", "bob"] and list(data.item_ids) == ["x", "y"]
    assert data.timestamps is None
    np.testing.assert_array_equal(data.ratings.toarray(), [[0, 1], [1, 1]])


def test_generic_csv_three_columns_has_no_timestamps(tmp_path):
    data = load_interactions(_write(tmp_path, "r.csv", "u,i,r\n2,5,3.5\n1,5,1\n"))
    assert data.timestamps is None
    assert _entries(data) == {(2, 5, 3.5, None), (1, 5, 1.0, None)}


@pytest.mark.parametrize("header, order", [
    ("userId,movieId,rating,timestamp", (0, 1, 2, 3)),
    ("timestamp,rating,movieId,userId", (3, 2, 1, 0)),
    ("USER_ID,Item-Id,score,ts", (0, 1, 2, 3)),
    ('"uid","artistID","weight","time"', (0, 1, 2, 3)),
])
def test_a_header_is_read_by_name_in_any_order(tmp_path, header, order):
    lines = [",".join(str((u, i, r, t)[k]) for k in order) for u, i, r, t in ROWS]
    data = load_interactions(_write(tmp_path, "r.csv", header + "\n" + "\n".join(lines) + "\n"))
    assert _entries(data) == set(ROWS)


@pytest.mark.parametrize("header, problem", [
    ("userId,rating,timestamp", "no item column"),     # used to load the ratings as item ids
    ("who,what", "unknown name(s) 'who', 'what'"),
    ("user,item,title", "unknown name(s) 'title'"),
    ("user,uid,item", "more than one user column"),
])
def test_a_header_that_cannot_be_mapped_is_refused_in_one_line(tmp_path, header, problem):
    path = _write(tmp_path, "r.csv", header + "\n1,2,3\n")
    with pytest.raises(ValueError) as error:
        load_interactions(path)
    message = str(error.value)
    assert "\n" not in message and str(path) in message and repr(header) in message and problem in message
    assert "movieid" in message and "timestamp" in message                # the names it expects


def test_tab_separated_files_with_a_header_and_headerless_text_ids(tmp_path):
    """HetRec's user_artists.dat is tab-separated with a header; a headerless file whose first
    line holds no number needs header=False."""
    text = "userID\tartistID\tweight\n2\t51\t13883\n2\t52\t11690\n"
    data = load_interactions(_write(tmp_path, "user_artists.dat", text))
    assert _entries(data) == {(2, 51, 13883.0, None), (2, 52, 11690.0, None)}
    path = _write(tmp_path, "clicks.tsv", "bob\tx\nalice\ty\n")
    with pytest.raises(ValueError, match="header=False"):
        load_interactions(path)
    assert list(load_interactions(path, header=False).user_ids) == ["alice", "bob"]
    assert _entries(load_interactions(_write(tmp_path, "h.csv", "3,10\n1,20\n"), header=False)) == \
        {(3, 10, 1.0, None), (1, 20, 1.0, None)}


def test_text_timestamps_are_an_error_with_file_and_line(tmp_path):
    """Under pandas 3 a text column used to raise TypeError('Cannot interpret StringDtype')."""
    path = _write(tmp_path, "r.csv", "user,item,rating,timestamp\n1,2,3,100\n1,3,4,2020-01-01\n")
    with pytest.raises(ValueError, match=r"line 3: timestamp '2020-01-01' is not an integer.*to_datetime"):
        load_interactions(path)


@pytest.mark.parametrize("name, text, expected", [
    ("log.txt", "1::2::3\n", "dat"), ("log.txt", "1\t2\t3\n", "tsv"),
    ("log.txt", "u,i\n1,2\n", "csv"), ("u.data", "1\t2\t3\n", "tsv"),
])
def test_format_detection_from_name_or_content(tmp_path, name, text, expected):
    path = _write(tmp_path, name, text)
    assert _entries(load_interactions(path)) == _entries(load_interactions(path, format=expected))
    assert load_interactions(path).ratings.nnz == 1


def test_explicit_format_overrides_the_name(tmp_path):
    path = _write(tmp_path, "odd.csv", "1\t2\t5\n")      # a tab file with a misleading suffix
    assert _entries(load_interactions(path, format="tsv")) == {(1, 2, 5.0, None)}


def test_trailing_blank_lines_are_ignored(tmp_path):
    data = load_interactions(_write(tmp_path, "u.data", "1\t2\t5\n\n\n"))
    assert data.ratings.nnz == 1


@pytest.mark.parametrize("name, text, where", [
    ("r.csv", "u,i,r,t\n1,2,3,4\n1,3,4\n", "line 3"),                  # missing column
    ("r.csv", "u,i,r,t\n1,2,3,4\n1,3,4,5,6\n", "line 3"),              # extra column
    ("r.csv", "u,i,r,t\n1,2,3,4\n1,3,good,5\n", "line 3"),             # non-numeric rating
    ("r.csv", "u,i,r,t\n1,2,3,4\n1,3,inf,5\n", "line 3"),              # infinite rating
    ("r.csv", "u,i,r,t\n1,2,3,4\n1,3,4,5.5\n", "line 3"),              # fractional timestamp
    ("r.csv", "u,i,r\n1,2,3\n\n1,3,4\n", "line 3: blank line"),        # blank line inside
    ("r.csv", "u,i,r\n1,2,3\n1,3,4\n1,2,5\n", "line 4"),               # repeated pair
    ("r.csv", "u,i,r\n1,2,3\n,3,4\n", "line 3"),                       # missing user id
    ("r.csv", "u,i,r\n1,2.5,3\n", "line 2"),                           # fractional item id
    ("r.csv", "1,2,3\n4,5,6\n", "line 1"),                             # no header
    ("r.csv", "", "file is empty"),                                    # empty file
    ("r.csv", "\nu,i\n1,2\n", "line 1"),                                # leading blank line
    ("r.csv", "u,i,r\n", "no interactions"),                           # header only
    ("r.csv", "only_one_column\n1\n", "line 1"),                       # too few fields
    ("u.data", "1\t2\t3\t4\n1\t2\n", "line 2"),                        # tsv missing field
    ("u.data", "1\t2\tx\t4\n", "line 1"),                              # tsv with a header
    ("ratings.dat", "1::2::3::4\n1:3::4::5\n", "line 2"),              # single ':' separator
    ("ratings.dat", "1::2::3::4\n1::3\n", "line 2"),                   # dat missing fields
])
def test_malformed_files_name_file_and_line(tmp_path, name, text, where):
    path = _write(tmp_path, name, text)
    with pytest.raises(DataError) as error:                 # a ValueError too
        load_interactions(path)
    assert str(path) in str(error.value) and where in str(error.value) and "\n" not in str(error.value)


def test_bad_format_and_missing_file(tmp_path):
    path = _write(tmp_path, "r.csv", "u,i\n1,2\n")
    with pytest.raises(DataError, match="format must be one of"):
        load_interactions(path, format="xlsx")
    with pytest.raises(DataError, match="no such file"):
        load_interactions(tmp_path / "absent.csv")
    with pytest.raises(DataError, match="cannot tell the format"):
        load_interactions(_write(tmp_path, "log.txt", "1 2 3\n"))
    with pytest.raises(DataError, match="header must be True, False or None"):
        load_interactions(path, header="yes")
    with pytest.raises(DataError, match=r"encoding='klingon' is not a text encoding Python knows; pass e\.g\. "
                                        r"encoding='utf-8'"):
        load_interactions(path, encoding="klingon")


def test_data_error_is_an_exported_value_error_with_file_and_line():
    assert issubclass(DataError, ValueError) and "DataError" in data_module.__all__
    error = DataError("r.csv, line 3: bad", Path("r.csv"), 3)
    assert (error.path, error.line, str(error)) == (Path("r.csv"), 3, "r.csv, line 3: bad")


# ---- encodings and corrupted files ---------------------------------------------------------------

HEADER = "userId,movieId,rating,timestamp\n"
BODY = "".join(f"{u},{i},{r},{t}\n" for u, i, r, t in ROWS)


@pytest.mark.parametrize("name, text", [
    ("ratings.csv", HEADER + BODY),
    ("ratings.csv", (HEADER + BODY).replace("\n", "\r\n")),                 # Excel: CRLF too
    ("user_artists.dat", "userID\tartistID\tweight\n2\t51\t13883\n"),
])
def test_a_utf8_byte_order_mark_is_skipped(tmp_path, name, text):
    """Excel's CSV export starts with a BOM; the header used to be refused ('unknown name(s)
    '\\ufeffuserId'; no user column')."""
    path = tmp_path / name
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    plain = _write(tmp_path, "plain_" + name, text)
    assert _entries(load_interactions(path)) == _entries(load_interactions(plain))


def test_latin1_text_is_an_error_with_file_line_and_byte_offset_or_read_with_encoding(tmp_path):
    """Latin-1 ids used to give pandas' UnicodeDecodeError, without file or line."""
    path = tmp_path / "clicks.csv"
    text = "user,item,rating\nbob,x,1\nZoë,y,2\nal,x,3\n"
    path.write_bytes(text.encode("latin-1"))
    offset = text.encode("latin-1").index("ë".encode("latin-1"))
    with pytest.raises(DataError) as error:
        load_interactions(path)
    assert str(error.value) == (f"{path}, line 3: byte 0xeb at byte offset {offset} is not valid utf-8 text "
                                "(invalid continuation byte); re-encode the file as UTF-8 (e.g. iconv -f latin1 "
                                "-t utf-8 OLD > NEW) or pass its encoding, e.g. encoding='latin-1'")
    assert error.value.line == 3
    data = load_interactions(path, encoding="latin-1")
    assert list(data.user_ids) == ["Zoë", "al", "bob"] and list(data.item_ids) == ["x", "y"]
    np.testing.assert_array_equal(data.ratings.toarray(), [[0, 2], [3, 0], [1, 0]])
    utf8 = _write(tmp_path, "utf8.csv", text)                      # the same ids from UTF-8
    assert list(load_interactions(utf8).user_ids) == list(data.user_ids)


def _corrupt(text: str, how: str) -> bytes:
    raw = text.encode()
    if how == "truncated mid-line":
        return raw[:raw.rindex(b"\n", 0, len(raw) - 1) + 5]           # the last line cut after 4 bytes
    if how == "random bytes appended":
        return raw + bytes(np.random.default_rng(0).integers(128, 256, 64, dtype=np.uint8))
    if how == "NUL bytes inside":
        return raw.replace(b"1,20", b"1,\x00\x0020", 1)                # used to load as a text id
    if how == "gzip under a .csv name":
        return gzip.compress(raw)
    if how == "UTF-16":
        return text.encode("utf-16")
    if how == "rating replaced by text":
        return raw.replace(b"2.5", b"good", 1)
    if how == "unbalanced quote":
        return raw.replace(b"7,10", b'7,"10', 1)
    if how == "cut inside a character":
        return raw + "é".encode()[:1]
    if how == "timestamp beyond int64":
        return raw.replace(b"104", b"1e30", 1)                       # used to wrap silently
    raise AssertionError(how)


@pytest.mark.parametrize("how, where, problem", [
    ("truncated mid-line", "line 6", "the file ends in the middle of this line without a newline, so it may be "
                                     "truncated"),
    ("random bytes appended", "line 7", "is not valid utf-8 text"),
    ("NUL bytes inside", "line 3", "NUL byte at byte offset"),
    ("gzip under a .csv name", "", "gzip-compressed data, not text"),
    ("UTF-16", "", "UTF-16 text (it starts with a UTF-16 byte-order mark), not utf-8; pass encoding='utf-16'"),
    ("rating replaced by text", "line 3", "rating 'good' is not a finite number"),
    ("unbalanced quote", "line 5", "a field opens a quote"),
    ("timestamp beyond int64", "line 6", "timestamp 1e+30 is beyond the 64-bit integer range"),
    ("cut inside a character", "line 7", "the file ends inside a multi-byte utf-8 character (byte offset 97)"),
])
def test_corrupted_files_are_one_line_data_errors(tmp_path, how, where, problem):
    path = tmp_path / "ratings.csv"
    path.write_bytes(_corrupt(HEADER + BODY, how))
    with pytest.raises(DataError) as error:
        load_interactions(path)
    message = str(error.value)
    assert message.startswith(f"{path}, {where}: " if where else f"{path}: "), message
    assert problem in message and "\n" not in message and "Traceback" not in message


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64])
def test_byte_offsets_and_lines_are_exact_across_scan_chunks(tmp_path, monkeypatch, chunk):
    """The scan reads in chunks; a bad byte (or a multi-byte character cut by a chunk boundary,
    chunk = 1) must still get its own line and offset."""
    monkeypatch.setattr(data_module, "_SCAN_BYTES", chunk)
    lines = [f"user{k},item,1\n" for k in range(40)]
    lines[25] = "usé,item,1\n"                                    # é: two bytes, may straddle a chunk
    lines[31] = "u\xff,item,1\n"
    raw = "".join(lines).encode("utf-8").replace("\xff".encode("utf-8"), b"\xff")
    path = tmp_path / "c.csv"
    path.write_bytes(b"user,item,rating\n" + raw)
    offset = len(b"user,item,rating\n") + raw.index(b"\xff")
    with pytest.raises(DataError, match=rf"line 33: byte 0xff at byte offset {offset} is not valid utf-8"):
        load_interactions(path)


def _interactions(dense: np.ndarray, with_time: bool = True) -> Interactions:
    """Interactions of a dense rating matrix (0 = not listed), ids 100+u and 200+i, timestamps
    1000 * u + i so that each entry's timestamp tells where it came from."""
    rows, cols = np.nonzero(dense)
    matrix = sp.csr_matrix((dense[rows, cols].astype(np.float32), (rows, cols)), shape=dense.shape)
    stamps = (1000 * rows + cols).astype(np.int64) if with_time else None
    return Interactions(matrix, np.arange(dense.shape[0]) + 100, np.arange(dense.shape[1]) + 200,
                        stamps)


def test_binarize_and_filter_ratings_use_the_threshold():
    dense = np.array([[5, 3.5, 0], [4, 0, 1], [0, 0, 4.5]], np.float32)
    data = _interactions(dense)
    np.testing.assert_array_equal(binarize(data, 4.0).toarray(), dense >= 4)
    assert binarize(data, 4.0).dtype == bool
    kept = filter_ratings(data, 4.0)
    assert kept.ratings.shape == dense.shape
    assert _entries(kept) == {e for e in _entries(data) if e[2] >= 4}
    with pytest.raises(ValueError, match="threshold must be a finite number"):
        binarize(data, float("nan"))


def _brute_force_core(dense: np.ndarray, min_user: int, min_item: int):
    """The union of all (user set, item set) whose induced sub-matrix meets both bounds."""
    n_users, n_items = dense.shape
    best_users, best_items = set(), set()
    for users in itertools.product([False, True], repeat=n_users):
        for items in itertools.product([False, True], repeat=n_items):
            sub = dense[np.ix_(users, items)] != 0
            if np.all(sub.sum(axis=1) >= min_user) and np.all(sub.sum(axis=0) >= min_item):
                best_users |= set(np.flatnonzero(users))
                best_items |= set(np.flatnonzero(items))
    return sorted(best_users), sorted(best_items)


@pytest.mark.parametrize("seed, min_user, min_item", [(0, 2, 2), (1, 1, 3), (2, 3, 1), (3, 2, 3)])
def test_filter_min_counts_is_the_largest_core(seed, min_user, min_item):
    rng = np.random.default_rng(seed)
    dense = (rng.random((5, 5)) < 0.55) * rng.integers(1, 6, (5, 5)).astype(np.float32)
    data = _interactions(dense)
    core = filter_min_counts(data, min_user=min_user, min_item=min_item)
    users, items = _brute_force_core(dense, min_user, min_item)
    assert list(core.user_ids) == [100 + u for u in users]
    assert list(core.item_ids) == [200 + i for i in items]
    np.testing.assert_array_equal(core.ratings.toarray(), dense[np.ix_(users, items)])
    assert _entries(core) <= _entries(data)                   # timestamps travel with entries


def test_filter_min_counts_needs_a_fixed_point():
    # item 2 has 2 users, but user 1 only holds item 2 and one more: dropping item 0 (1 user)
    # leaves user 1 with 1 item, which then takes item 2 below 2 users.
    dense = np.array([[0, 1, 1, 1], [1, 0, 1, 0], [0, 1, 0, 1]], np.float32)
    core = filter_min_counts(_interactions(dense), min_user=2, min_item=2)
    assert list(core.user_ids) == [100, 102] and list(core.item_ids) == [201, 203]


def test_filter_min_counts_validates_bounds():
    with pytest.raises(ValueError, match="min_item must be an integer >= 0"):
        filter_min_counts(_interactions(np.eye(2, dtype=np.float32)), min_item=-1)


def test_densify_top_keeps_popular_items_then_active_users():
    rng = np.random.default_rng(4)
    dense = (rng.random((9, 8)) < 0.4).astype(np.float32) * 3
    dense[:, 5] = 3                                           # a tie-free most popular item
    data = _interactions(dense, with_time=False)
    item_counts = (dense != 0).sum(axis=0)
    items = sorted(sorted(range(8), key=lambda i: (-item_counts[i], i))[:4])
    user_counts = (dense[:, items] != 0).sum(axis=1)
    users = sorted(sorted(range(9), key=lambda u: (-user_counts[u], u))[:3])
    dense_top = densify_top(data, n_users=3, n_items=4)
    assert list(dense_top.user_ids) == [100 + u for u in users]
    assert list(dense_top.item_ids) == [200 + i for i in items]
    np.testing.assert_array_equal(dense_top.ratings.toarray(), dense[np.ix_(users, items)])
    assert densify_top(data, n_users=50, n_items=50).ratings.shape == (9, 8)
    with pytest.raises(ValueError, match="n_users must be an integer >= 1"):
        densify_top(data, n_users=0, n_items=3)


def test_id_lookup_rejects_unknown_ids():
    data = _interactions(np.eye(3, dtype=np.float32))
    np.testing.assert_array_equal(user_index(data, [102, 100]), [2, 0])
    with pytest.raises(ValueError, match="unknown item id 7"):
        item_index(data, [201, 7])


def test_text_id_lookup_compares_whole_ids(tmp_path):
    data = load_interactions(_write(tmp_path, "c.csv", "user,item\nbob,x\nal,x\n"))
    np.testing.assert_array_equal(user_index(data, ["bob", "al"]), [1, 0])
    with pytest.raises(ValueError, match="unknown user id 'bobby'"):
        user_index(data, ["bobby"])                    # not truncated to the stored width
    with pytest.raises(ValueError, match="item ids must be text"):
        item_index(data, [1])


def test_integer_timestamps_stay_exact(tmp_path):
    stamp = 1_700_000_000_123_456_789                   # nanoseconds: beyond float64's 2^53
    data = load_interactions(_write(tmp_path, "r.csv", f"u,i,r,t\n1,2,3,{stamp}\n"))
    assert data.timestamps.tolist() == [stamp]


def test_interactions_validates_its_parts():
    matrix = sp.csr_matrix(np.eye(2, dtype=np.float32))
    with pytest.raises(ValueError, match="strictly increasing"):
        Interactions(matrix, np.array([2, 1]), np.array([0, 1]))
    with pytest.raises(ValueError, match="2 user ids and 3 item ids"):
        Interactions(matrix, np.array([1, 2]), np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="float32"):
        Interactions(matrix.astype(np.float64), np.array([1, 2]), np.array([0, 1]))
    with pytest.raises(ValueError, match="one entry per stored rating"):
        Interactions(matrix, np.array([1, 2]), np.array([0, 1]), np.zeros(3, np.int64))


def test_movielens_latest_small_when_present():
    if not REAL_RATINGS.is_file():
        pytest.skip(f"{REAL_RATINGS} is absent (MovieLens ml-latest-small not downloaded)")
    data = load_interactions(REAL_RATINGS)
    assert data.ratings.shape == (610, 9724)
    assert data.ratings.nnz == 100836
    assert data.timestamps is not None and data.timestamps.shape == (100836,)
    assert set(np.unique(data.ratings.data)) <= {0.5 * k for k in range(1, 11)}


# ---- Coat --------------------------------------------------------------------------------------

COAT_TRAIN = np.array([[0, 4, 0, 1], [5, 0, 2, 0], [0, 0, 3, 4]], np.float64)
COAT_TEST = np.array([[1, 0, 5, 0], [0, 3, 0, 0], [2, 0, 3, 0]], np.float64)
COAT_PROPENSITIES = np.array([[0.1, 0.25, 0.5, 1.0], [0.05, 0.2, 0.3, 0.4], [0.01, 0.02, 0.9, 0.6]])


def write_coat(folder: Path, train=COAT_TRAIN, test=COAT_TEST, propensities=COAT_PROPENSITIES,
               fmt: str = "%g") -> Path:
    """A Coat-layout folder (dense matrices, spaces between columns, one user per line)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, matrix in (("train", train), ("test", test), ("propensities", propensities)):
        np.savetxt(folder / COAT_FILES[name], matrix, fmt=fmt)
    return folder


def test_load_coat_round_trips_a_fixture(tmp_path):
    coat = load_coat(write_coat(tmp_path / "coat", fmt="%.18e"))      # the shipped number format
    for name, expected in (("train", COAT_TRAIN), ("test", COAT_TEST)):
        matrix = getattr(coat, name)
        assert sp.issparse(matrix) and matrix.format == "csr" and matrix.dtype == np.float32
        np.testing.assert_array_equal(matrix.toarray(), expected)
        assert matrix.nnz == np.count_nonzero(expected)                # unrated zeros not stored
    assert coat.propensities.dtype == np.float64
    np.testing.assert_array_equal(coat.propensities, COAT_PROPENSITIES)


def _replace_line(path: Path, line: int, text: str) -> None:
    lines = path.read_text().splitlines()
    lines[line - 1] = text
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("file, line, text, problem", [
    ("train.ascii", 2, "5 0 2", "train.ascii, line 2: 3 columns, but line 1 has 4"),
    ("test.ascii", 3, "2 0 x 0", "test.ascii, line 3: 'x' is not a number"),
    ("train.ascii", 3, "0 0 6 4", "train.ascii, line 3: column 3 holds 6; expected 0 (unrated) "
                                 "or a rating in 1..5"),
    ("test.ascii", 1, "1 0 0.5 0", "test.ascii, line 1: column 3 holds 0.5"),
    ("propensities.ascii", 2, "0.05 0 0.3 0.4", "propensities.ascii, line 2: column 2 holds 0; "
                                               "expected a propensity in (0, 1]"),
    ("propensities.ascii", 1, "0.1 1.5 0.5 1", "propensities.ascii, line 1: column 2 holds 1.5"),
    ("train.ascii", 2, "", "train.ascii, line 2: blank line inside the matrix"),
    ("test.ascii", 2, "0 nan 0 0", "test.ascii, line 2: NaN or infinite value"),
])
def test_load_coat_names_the_file_and_line_of_bad_input(tmp_path, file, line, text, problem):
    folder = write_coat(tmp_path / "coat")
    _replace_line(folder / file, line, text)
    with pytest.raises(ValueError, match=re.escape(problem)):
        load_coat(folder)


def test_load_coat_refuses_mismatched_shapes_and_missing_files(tmp_path):
    folder = write_coat(tmp_path / "coat", test=COAT_TEST[:2])
    with pytest.raises(ValueError, match=r"test.ascii: a 2 x 4 matrix, but train.ascii is 3 x 4"):
        load_coat(folder)
    (folder / "propensities.ascii").unlink()
    with pytest.raises(ValueError, match=r"propensities.ascii: no such file"):
        load_coat(folder)
    with pytest.raises(ValueError, match="no such folder"):
        load_coat(tmp_path / "elsewhere")


def test_load_coat_failures_are_data_errors_and_a_bom_is_skipped(tmp_path):
    folder = write_coat(tmp_path / "coat")
    path = folder / "train.ascii"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    np.testing.assert_array_equal(load_coat(folder).train.toarray(), COAT_TRAIN)
    path.write_bytes(path.read_bytes()[:-3])                    # "0 0 3 4" cut to "0 0 3", no newline
    with pytest.raises(DataError, match=r"train.ascii, line 3: 3 columns, but line 1 has 4; the file ends in "
                                        r"the middle of this line"):
        load_coat(folder)
    path.write_bytes(b"0 4 0 1\n5 \x00 2 0\n")
    with pytest.raises(DataError, match=r"train.ascii, line 2: NUL byte at byte offset 10"):
        load_coat(folder)
    with pytest.raises(DataError, match="no such folder"):
        load_coat(tmp_path / "elsewhere")


def test_load_coat_accepts_trailing_blank_lines(tmp_path):
    folder = write_coat(tmp_path / "coat")
    path = folder / "train.ascii"
    path.write_text(path.read_text() + "\n\n")
    np.testing.assert_array_equal(load_coat(folder).train.toarray(), COAT_TRAIN)


REAL_COAT = data_root() / "coat"


@pytest.mark.skipif(not (REAL_COAT / "train.ascii").is_file(),
                    reason=f"Coat data not found at {REAL_COAT} (set SIMREC_DATA)")
def test_load_coat_reads_the_real_files():
    """The shipped Coat data as its README describes it: 290 users x 300 coats, 24 self-selected
    ratings and 16 random ratings per user."""
    coat = load_coat(REAL_COAT)
    assert coat.train.shape == coat.test.shape == coat.propensities.shape == (290, 300)
    assert np.all(np.diff(coat.train.indptr) == 24) and np.all(np.diff(coat.test.indptr) == 16)
    assert coat.train.nnz == 6960 and coat.test.nnz == 4640
    assert set(np.unique(coat.train.data)) == set(np.unique(coat.test.data)) == {1, 2, 3, 4, 5}
    assert 0 < coat.propensities.min() and coat.propensities.max() <= 1
