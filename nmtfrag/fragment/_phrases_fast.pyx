# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled `phrases.phrase_records`: same contract, same output, C loops.

Extraction runs once per phrase-pair occurrence (millions per corpus), where
Python's per-iteration cost dominates; here the enumeration runs on C arrays and only
the strings that are written become Python objects. `phrases.py` keeps the Python
version (the reference the tests compare against) and uses it when this module was
not compiled.
"""
from libc.stdlib cimport free, malloc


cdef Py_ssize_t _put_int(char *buf, Py_ssize_t pos, int value) noexcept:
    """Write `value` (>= 0) in decimal at buf[pos]; return the position after it."""
    cdef char digits[12]
    cdef int n = 0
    while True:
        digits[n] = 48 + value % 10
        value //= 10
        n += 1
        if value == 0:
            break
    while n:
        n -= 1
        buf[pos] = digits[n]
        pos += 1
    return pos


cdef str _inner_alignment(int *col_start, int *col_src, int t0, int t1, int s0,
                          char *buf):
    """`i-j ...` of the points in target words t0..t1, relative to (s0, t0)."""
    cdef Py_ssize_t pos = 0
    cdef int j, k
    for j in range(t0, t1 + 1):
        for k in range(col_start[j], col_start[j + 1]):
            if pos:
                buf[pos] = 32
                pos += 1
            pos = _put_int(buf, pos, col_src[k] - s0)
            buf[pos] = 45
            pos += 1
            pos = _put_int(buf, pos, j - t0)
    return buf[:pos].decode("ascii")


def phrase_records(list src_tokens, list tgt_tokens, points, int max_len, int min_len=1,
                   bint with_alignment=False, bint keep_whole=True):
    """See `nmtfrag.fragment.phrases.phrase_records` (the Python reference)."""
    cdef int n_src = len(src_tokens), n_tgt = len(tgt_tokens)
    cdef list pts = list(points)
    cdef int n_pts = len(pts)
    cdef int *first_tgt = <int *> malloc((n_src + 1) * sizeof(int))
    cdef int *last_tgt = <int *> malloc((n_src + 1) * sizeof(int))
    cdef int *col_start = <int *> malloc((n_tgt + 2) * sizeof(int))
    cdef int *col_src = <int *> malloc((n_pts + 1) * sizeof(int))
    cdef int *pt_src = <int *> malloc((n_pts + 1) * sizeof(int))
    cdef int *pt_tgt = <int *> malloc((n_pts + 1) * sizeof(int))
    cdef char *buf = <char *> malloc(24 * n_pts + 1)
    cdef int i, j, k, m, t0, t1, s0, s1, lo, hi, new_lo, new_hi, low, high, top
    cdef bint whole_tgt, is_whole
    cdef list records = []
    cdef list src_text = [None] * (n_src * max_len if n_src else 0)
    cdef Py_ssize_t whole = 0
    cdef str tgt_text, suffix
    cdef object cached
    if not (first_tgt and last_tgt and col_start and col_src and pt_src and pt_tgt and buf):
        free(first_tgt); free(last_tgt); free(col_start); free(col_src)
        free(pt_src); free(pt_tgt); free(buf)
        raise MemoryError()
    try:
        for i in range(n_src):
            first_tgt[i] = n_tgt
            last_tgt[i] = -1
        for j in range(n_tgt + 2):
            col_start[j] = 0
        for k in range(n_pts):
            i, j = pts[k]
            if not (0 <= i < n_src and 0 <= j < n_tgt):
                raise ValueError(f"alignment point {i}-{j} outside a {n_src}x{n_tgt} "
                                 f"sentence pair")
            pt_src[k], pt_tgt[k] = i, j
            col_start[j + 2] += 1
            if j < first_tgt[i]:
                first_tgt[i] = j
            if j > last_tgt[i]:
                last_tgt[i] = j
        # columns: the source words of each target word, ascending (counting sort)
        for j in range(2, n_tgt + 2):
            col_start[j] += col_start[j - 1]
        for k in range(n_pts):
            col_src[col_start[pt_tgt[k] + 1]] = pt_src[k]
            col_start[pt_tgt[k] + 1] += 1
        for j in range(n_tgt):  # insertion sort of each (short) column
            for k in range(col_start[j] + 1, col_start[j + 1]):
                i = col_src[k]
                m = k - 1
                while m >= col_start[j] and col_src[m] > i:
                    col_src[m + 1] = col_src[m]
                    m -= 1
                col_src[m + 1] = i

        for t0 in range(n_tgt):
            lo, hi = n_src, -1
            low, high = n_tgt, -1
            top = min(t0 + max_len, n_tgt)
            for t1 in range(t0, top):
                if col_start[t1] < col_start[t1 + 1]:
                    new_lo = min(lo, col_src[col_start[t1]])
                    new_hi = max(hi, col_src[col_start[t1 + 1] - 1])
                    for i in range(new_lo, new_hi + 1):
                        if hi >= 0 and lo <= i <= hi:
                            continue  # already covered
                        if first_tgt[i] < low:
                            low = first_tgt[i]
                        if last_tgt[i] > high:
                            high = last_tgt[i]
                    lo, hi = new_lo, new_hi
                elif hi < 0:
                    continue  # no alignment point yet
                if hi - lo >= max_len or low < t0:
                    break  # no longer target span can fix either
                if high > t1 or t1 - t0 + 1 < min_len:
                    continue
                whole_tgt = t1 - t0 + 1 == n_tgt
                tgt_text = "\t" + " ".join(tgt_tokens[t0:t1 + 1]) + "\t"
                s0 = lo
                while s0 >= 0 and (s0 == lo or last_tgt[s0] < 0) and s0 > hi - max_len:
                    if with_alignment:
                        suffix = tgt_text + _inner_alignment(col_start, col_src, t0, t1,
                                                             s0, buf)
                    else:
                        suffix = tgt_text
                    s1 = hi
                    while s1 < n_src and (s1 == hi or last_tgt[s1] < 0) and s1 < s0 + max_len:
                        if s1 - s0 + 1 >= min_len:
                            is_whole = whole_tgt or s1 - s0 + 1 == n_src
                            whole += is_whole
                            if keep_whole or not is_whole:
                                k = s0 * max_len + (s1 - s0)
                                cached = src_text[k]
                                if cached is None:
                                    cached = " ".join(src_tokens[s0:s1 + 1])
                                    src_text[k] = cached
                                records.append(cached + suffix)
                        s1 += 1
                    s0 -= 1
    finally:
        free(first_tgt); free(last_tgt); free(col_start); free(col_src)
        free(pt_src); free(pt_tgt); free(buf)
    return records, whole


cdef extern from "stdlib.h":
    void qsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *) noexcept nogil) nogil


cdef int _cmp_keys(const void *a, const void *b) noexcept nogil:
    cdef long long x = (<const long long *> a)[0], y = (<const long long *> b)[0]
    return (x > y) - (x < y)


def canonical_alignment(str line):
    """(points sorted by (i, j) without repeats, canonical Pharaoh text) of one line, or
    None when the line is anything but plain ASCII `i-j` items: the caller's Python
    parser then decides (and names the error)."""
    cdef bytes raw
    try:
        raw = line.encode("ascii")
    except UnicodeEncodeError:
        return None
    cdef const char *s = raw
    cdef Py_ssize_t n = len(raw), pos = 0, count = 0, k
    cdef long long *keys = <long long *> malloc((n // 4 + 1) * sizeof(long long))
    cdef char *buf = NULL
    cdef long long i, j
    cdef int digits
    cdef list points = []
    if not keys:
        raise MemoryError()
    try:
        while True:
            while pos < n and (s[pos] == 32 or s[pos] == 9 or s[pos] == 10 or s[pos] == 13):
                pos += 1
            if pos == n:
                break
            i = j = 0
            digits = 0
            while pos < n and 48 <= s[pos] <= 57 and digits < 10:
                i = i * 10 + (s[pos] - 48)
                pos += 1
                digits += 1
            if digits == 0 or digits == 10 or pos == n or s[pos] != 45:
                return None
            pos += 1
            digits = 0
            while pos < n and 48 <= s[pos] <= 57 and digits < 10:
                j = j * 10 + (s[pos] - 48)
                pos += 1
                digits += 1
            if digits == 0 or digits == 10 or (pos < n and not (
                    s[pos] == 32 or s[pos] == 9 or s[pos] == 10 or s[pos] == 13)):
                return None
            keys[count] = (i << 32) | j
            count += 1
        qsort(keys, count, sizeof(long long), _cmp_keys)
        buf = <char *> malloc(22 * count + 1)
        if not buf:
            raise MemoryError()
        pos = 0
        for k in range(count):
            if k and keys[k] == keys[k - 1]:
                continue
            i, j = keys[k] >> 32, keys[k] & 0xFFFFFFFF
            points.append((i, j))
            if pos:
                buf[pos] = 32
                pos += 1
            pos = _put_int(buf, pos, <int> i)
            buf[pos] = 45
            pos += 1
            pos = _put_int(buf, pos, <int> j)
        return points, buf[:pos].decode("ascii")
    finally:
        free(keys)
        free(buf)
