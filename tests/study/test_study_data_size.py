"""The DP-SGD data-size curve: the fit in log₂ of the corpus share recovers a known
trend, and the corpus size for half the gain is printed as an extrapolation."""
import pytest

from nmtfrag.study import data_size
from nmtfrag.study.config import Cell, StudyConfig


def _config(cells):
    return StudyConfig(path="x", title="t", seed=1, model="m", checkpoint="", data=None,
                       decode=None, training=None, audit=None, machine=None,
                       cells=tuple(cells))


def test_the_fit_recovers_a_known_trend_and_extrapolates_half_the_gain():
    # share = 0.2 + 0.1·log2(f): half the gain at f = 2^3 = 8
    pts = [(0.25, 0.0), (0.5, 0.1), (1.0, 0.2)]
    a, b = data_size.fit(pts)
    assert a == pytest.approx(0.2) and b == pytest.approx(0.1)
    assert data_size.corpus_for(0.5, a, b) == pytest.approx(8.0)
    assert data_size.corpus_for(0.5, 0.2, -0.1) is None


def test_the_report_section_lists_the_dp_sgd_cells_by_corpus_share():
    cells = [Cell("dp-q", "dp-sgd", epsilon=8, train_fraction=0.25),
             Cell("dp-h", "dp-sgd", epsilon=8, train_fraction=0.5),
             Cell("dp", "dp-sgd", epsilon=8),
             Cell("dp-pub", "dp-sgd", epsilon=8, public_batch=100)]
    rows = [{"name": "baseline", "share_of_gain": 0.0},
            {"name": "dp-q", "share_of_gain": 0.0}, {"name": "dp-h", "share_of_gain": 0.1},
            {"name": "dp", "share_of_gain": 0.2}, {"name": "dp-pub", "share_of_gain": 0.4}]
    text = "\n".join(data_size.render(_config(cells), rows))
    assert "| 8 | 25% | 0% |" in text and "| 8 | 100% | 20% |" in text
    assert "about 8.0× the owner's corpus (extrapolated far" in text
    assert "percentage points per doubling" in text  # not a relative change
    assert "40%" not in text  # a cell with public pairs is another curve


def test_an_extrapolated_multiple_is_rounded_to_what_it_can_claim():
    """Beyond the measured range a fit gives an order of magnitude, not 5562.2."""
    from nmtfrag.study.data_size import _times

    assert [_times(x) for x in (8.04, 37.4, 5562.2, 123456.0)] == [
        "8.0", "37", "5,600", "120,000"]
