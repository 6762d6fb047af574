"""Canary exposure intervals: the bootstrap interval agrees with the normal theory where
that holds, a paired difference sees a shift two separate intervals cannot, and runs
audited on other canaries are never paired."""
import numpy as np

from nmtfrag.audit import compare, compare_notes, exposure_stats as es


def _report(exposures, secrets=None, repeats=10):
    return {"canaries": [{"name": f"c{i}", "secret": (secrets or {}).get(i, str(i)),
                          "repeats": repeats, "exposure": e}
                         for i, e in enumerate(exposures)]}


def _row(name, report):
    return {"name": name, "exposure_canaries": es.canaries_by_repeats(report),
            "exposure_canary_set": es.canary_set_digest(report)}


def test_the_interval_matches_normal_theory_on_many_canaries():
    v = np.random.default_rng(7).normal(5.0, 2.0, 400)
    mean, lo, hi = es.mean_interval(v, np.random.default_rng(1))
    half = 1.96 * v.std(ddof=1) / np.sqrt(len(v))  # the independent reference
    assert mean == v.mean()
    assert abs((hi - lo) / 2 - half) < 0.1 * half and lo < mean < hi


def test_a_paired_shift_is_seen_where_separate_intervals_overlap():
    spread = [1.0, 4.0, 9.0, 2.0, 12.0, 3.0, 7.0, 0.5, 5.0, 8.0]
    full = _row("sent", _report(spread))
    shifted = _row("len4", _report([e - 1.0 for e in spread]))
    iv = es.exposure_intervals([full, shifted], full)
    a, b = iv["sent"]["10"], iv["len4"]["10"]
    assert b["low"] < a["high"] and "diff" not in a  # the separate intervals overlap
    assert np.isclose(b["diff"], -1.0) and np.isclose(b["diff_high"], -1.0)
    assert es.separable(iv, "10") == (["len4"], [], [])
    noisy = _row("len7", _report([e + d for e, d in zip(spread, [3, -3] * 5)]))
    assert es.separable(es.exposure_intervals([full, noisy], full), "10") == ([], ["len7"], [])
    louder = _row("sent2", _report([e + 5.0 for e in spread]))  # leaks more: named too
    assert es.separable(es.exposure_intervals([full, louder], full), "10") == ([], [], ["sent2"])
    few = _row("few", {"canaries": _report(spread)["canaries"][:4]})
    assert "10" not in es.exposure_intervals([full, few], full).get("few", {})


def test_runs_on_other_canaries_are_not_paired_and_nothing_of_them_is_written(tmp_path):
    full = _row("sent", _report([5.0, 6.0, 7.0, 8.0, 9.0]))
    other = _row("elsewhere", _report([1.0, 2.0, 3.0, 4.0, 5.0], secrets={0: "secret-xyz"}))
    iv = es.exposure_intervals([full, other], full)
    assert "diff" not in iv["elsewhere"]["10"] and iv["elsewhere"]["10"]["n"] == 5
    assert "secret-xyz" not in repr(other)  # names and exposures only
    # report.json keeps neither the per-canary exposures nor the canary set's digest
    import json
    import os

    import yaml

    for run in ("a", "b"):
        os.makedirs(tmp_path / run)
        (tmp_path / run / "exposure.json").write_text(json.dumps({
            "kind": "nmtfrag-exposure-audit", "summary_by_repeats": {"10": {
                "canaries": 5, "exposure_mean": 3.0, "extracted": 0}},
            **_report([1.0, 2.0, 3.0, 4.0, 5.0], secrets={0: "secret-xyz"})}))
    (tmp_path / "runs.yaml").write_text(yaml.safe_dump({"title": "t", "runs": [
        {"name": n, "exposure": f"{n}/exposure.json"} for n in ("a", "b")]}))
    compare.compare_runs(str(tmp_path / "runs.yaml"), str(tmp_path / "out"))
    written = (tmp_path / "out" / "report.json").read_text()
    assert "exposure_mean" in written
    assert not any(k in written for k in es.ROW_KEYS) and "secret-xyz" not in written


def test_the_comparison_report_shows_the_spread_and_what_it_can_tell():
    full = {**_row("sent", _report([9.0, 10.0, 11.0, 12.0, 10.0])),
            "approach": "full sentences", "bleu": 30.0}
    phr = {**_row("len4", _report([2.0, 3.0, 4.0, 3.0, 2.5])), "approach": "phrases",
           "bleu": 20.0}
    md = "\n".join(compare.exposure_markdown([full, phr]))
    assert "| len4 | 2.90 [" in md and "; Δ -7.50 [" in md
    notes = compare_notes.table_notes([full, phr])
    assert any(n.startswith("Canaries planted 10 times: exposure below sent's") and
               "len4; not told apart from it: none" in n for n in notes), notes
