"""Symmetrisation on worked cases, Pharaoh parsing."""
import pytest

from nmtfrag.fragment.symmetrize import (format_pharaoh, grow_diag_final_and, intersection,
                                parse_pharaoh, symmetrize, union)

DIAG = {(0, 0), (1, 1), (2, 2)}


def test_union_and_intersection():
    fwd, rev = DIAG | {(0, 2)}, DIAG | {(2, 0)}
    assert union(fwd, rev) == DIAG | {(0, 2), (2, 0)}
    assert intersection(fwd, rev) == DIAG


def test_gdfa_does_not_add_points_between_aligned_words():
    # The off-diagonal points of the union join words that are already aligned.
    fwd, rev = DIAG | {(0, 2)}, DIAG | {(2, 0)}
    assert grow_diag_final_and(fwd, rev, 3, 3) == DIAG


def test_gdfa_grows_to_diagonal_neighbour_of_unaligned_word():
    assert grow_diag_final_and({(0, 0), (1, 1)}, {(0, 0)}, 2, 2) == {(0, 0), (1, 1)}


def test_gdfa_grows_transitively_within_one_scan():
    # (2,1) is added next to (1,1); then (2,2) next to (1,1) since target 2 is unaligned.
    fwd, rev = {(0, 0), (1, 1), (2, 1)}, {(0, 0), (1, 1), (2, 2)}
    assert grow_diag_final_and(fwd, rev, 3, 3) == {(0, 0), (1, 1), (2, 1), (2, 2)}


def test_gdfa_final_and_adds_points_whose_words_are_both_unaligned():
    assert grow_diag_final_and({(0, 0), (2, 2)}, {(0, 0)}, 3, 3) == {(0, 0), (2, 2)}


def test_gdfa_final_and_skips_points_with_one_word_aligned():
    # grow-diag-final (without -and) would add (0,2); -and needs both words unaligned.
    assert grow_diag_final_and({(0, 0), (0, 2)}, {(0, 0)}, 1, 3) == {(0, 0)}


def test_gdfa_is_between_intersection_and_union():
    fwd = {(0, 0), (1, 2), (2, 1), (3, 3), (4, 3), (0, 4)}
    rev = {(0, 0), (1, 1), (2, 1), (3, 3), (4, 4)}
    result = grow_diag_final_and(fwd, rev, 5, 5)
    assert fwd & rev <= result <= fwd | rev


def test_pharaoh_round_trip_and_errors():
    assert parse_pharaoh("2-1 0-0  1-3") == {(0, 0), (1, 3), (2, 1)}
    assert format_pharaoh({(2, 1), (0, 0), (1, 3)}) == "0-0 1-3 2-1"
    assert parse_pharaoh("") == set()
    for bad in ("0-", "a-1", "1:2", "-1-2"):
        with pytest.raises(ValueError):
            parse_pharaoh(bad)
    with pytest.raises(ValueError):
        symmetrize(set(), set(), "grow-diag", 1, 1)


def test_compiled_canonical_points_equal_the_python_ones():
    """Same points and text, or the same refusal (the compiled parser hands anything
    unusual to the Python one)."""
    import random

    from nmtfrag.fragment.symmetrize import canonical_points, canonical_points_python

    rng = random.Random(5)
    lines = ["", " ", "0-0", "3-1 0-2 0-1 0-2\n", " 1-1\t0-0  \r\n", "1-2-3", "1-", "-1",
             "a-1", "0-1x", "1--2", "0-1\x0b2-3", "١-٢", "²-1", "12345678901-1", "0-0,1-1"]
    for _ in range(300):
        points = [(rng.randrange(60), rng.randrange(60)) for _ in range(rng.randrange(30))]
        seps = [rng.choice([" ", "  ", "\t"]) for _ in points]
        lines.append("".join(f"{i}-{j}{sep}" for (i, j), sep in zip(points, seps)))
    for line in lines:
        try:
            expected = canonical_points_python(line)
        except ValueError:
            with pytest.raises(ValueError):
                canonical_points(line)
        else:
            assert canonical_points(line) == expected, line
