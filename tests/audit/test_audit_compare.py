"""Comparison report: figures are carried over from each run's reports, missing ones are
shown as '–', ε comes from privacy.json or the YAML, bad input is refused."""
import json
import subprocess
import sys

import pytest

from nmtfrag.audit.compare import compare_runs
from nmtfrag.audit.compare_notes import table_notes
from nmtfrag.errors import InputError


def _w(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def _eval(bleu, p_bleu=None, p_chrf=None, ratio=1.0):
    scores = {"bleu": bleu, "chrf": bleu + 20, "bleu_signature": "sig", "length_ratio": ratio}
    if p_bleu is not None:
        scores["significance"] = {"BLEU": {"p_value": p_bleu}, "chrF": {"p_value": p_chrf}}
    return {"kind": "nmtfrag-evaluation", "scores": scores, "params": {"lines": 300}}


def _exposure(e100, e0):
    return {"kind": "nmtfrag-exposure-audit", "summary_by_repeats": {
        "0": {"canaries": 2, "exposure_mean": e0, "extracted": 0},
        "100": {"canaries": 2, "exposure_mean": e100, "extracted": 1}}}


RECON = {"kind": "nmtfrag-reconstruction-audit", "max_len": 4,
         "release": {"params": {"sample_rate": 0.5}, "contents": {
             "pairs": 200, "distinct_pairs": 157, "punct_or_number_only_share": 0.6,
             "identical_sides_share": 0.3, "length_histogram": {
                 "1": 100, "2": 40, "3": 10, "4": 7, "5-7": 0, "8-15": 0, ">15": 0}}},
         "scores": {"pair": {"rebuilt_exactly_share": 0.013},
                    "tgt": {"rebuilt_exactly_share": 0.015, "ngrams_recovered_share": 0.14,
                            "longest_span": {"median": 6},
                            "longest_span_share_of_sentence": {"mean": 0.34}},
                    "src": {"ngrams_recovered_share": 0.12}}}


@pytest.fixture
def runs(tmp_path):
    _w(tmp_path / "e" / "base" / "report.json", _eval(10.0))
    _w(tmp_path / "e" / "phr" / "report.json", _eval(14.5, 0.001, 0.2, ratio=1.31))
    _w(tmp_path / "e" / "dp" / "report.json", _eval(11.0, 0.3, 0.04, ratio=0.97))
    _w(tmp_path / "x" / "base.json", _exposure(1.2, 1.0))
    _w(tmp_path / "x" / "phr.json", _exposure(6.5, 1.1))
    _w(tmp_path / "r" / "report.json", RECON)
    _w(tmp_path / "mi" / "report.json", {
        "kind": "nmtfrag-membership-audit", "auc": 0.612, "tpr_at_1pct_fpr": 0.034,
        "non_members_dropped_as_members": 3,
        "by_repeats": {"once": {"members": 40, "auc": 0.55, "tpr_at_1pct_fpr": 0.01},
                       "repeated": {"members": 60, "auc": 0.66, "tpr_at_1pct_fpr": 0.05}},
        "same_files": {"non_members": 90, "auc": 0.53, "tpr_at_1pct_fpr": 0.02,
                       "by_repeats": {"once": {"members": 40, "auc": 0.51,
                                               "tpr_at_1pct_fpr": 0.0}}}})
    # an audit from before held-out pairs found in training were left out
    _w(tmp_path / "mi-old" / "report.json", {"kind": "nmtfrag-membership-audit",
                                             "auc": 0.7, "tpr_at_1pct_fpr": 0.05})
    _w(tmp_path / "m" / "privacy.json", {"total": {"epsilon": 7.9, "delta": 1e-5}})
    (tmp_path / "runs.yaml").write_text(
        "title: test\nruns:\n"
        "  - {name: baseline, approach: none, evaluate: e/base, exposure: x/base.json}\n"
        "  - {name: phrases, evaluate: e/phr, exposure: x/phr.json, reconstruction: r,"
        " membership: mi}\n"
        "  - {name: dp, evaluate: e/dp, privacy: m/privacy.json, membership: mi-old}\n")
    return tmp_path


def test_report_carries_figures(runs):
    rep = compare_runs(str(runs / "runs.yaml"), str(runs / "out"))
    by = {r["name"]: r for r in rep["runs"]}
    assert by["phrases"]["bleu"] == 14.5
    assert by["phrases"]["reconstruction"]["tgt_ngrams_recovered_share"] == 0.14
    assert by["phrases"]["exposure"]["100"]["exposure_mean"] == 6.5
    assert by["dp"]["epsilon"] == 7.9 and "epsilon" not in by["baseline"]
    assert by["phrases"]["membership"]["auc"] == 0.612
    assert by["phrases"]["membership"]["auc_repeated"] == 0.66
    assert by["dp"]["membership"]["auc_repeated"] is None  # an older audit: no split
    assert by["phrases"]["membership"]["auc_same_files"] == 0.53
    assert by["phrases"]["membership"]["auc_once_same_files"] == 0.51
    assert "auc_same_files" not in by["dp"]["membership"]
    assert "membership" not in by["baseline"]
    md = (runs / "out" / "report.md").read_text()
    assert "| phrases |" in md and "14.00%" in md and "6.50" in md and "7.9" in md
    assert "| 0.612 | 0.034 | 0.550 |" in md
    assert "| 0.700‡ | 0.050‡ | – |" in md and "‡: an older membership audit" in md
    # what the release holds, under the table
    assert "| phrases | 200 | 157 | 60.0% | 30.0% | 100 | 40 | 10 | 7 | 0 | 0 | 0 |" in md
    # significance marks follow each metric's own p-value; the length ratio is shown
    assert "| phrases |  | 14.50* | 34.5 | 1.31 |" in md
    assert "| dp |  | 11.00 | 31.0* | 0.97 |" in md
    assert by["phrases"]["p_bleu"] == 0.001 and by["baseline"]["p_bleu"] is None
    assert (runs / "out" / "privacy_utility.png").stat().st_size > 1000
    assert json.loads((runs / "out" / "report.json").read_text()) == rep


@pytest.mark.parametrize("yaml_text, message", [
    ("runs: []\n", "non-empty"),
    ("runs:\n  - {name: a, evaluate: nope}\n", "does not exist"),
    ("runs:\n  - {name: a, bleu: 3}\n", "unknown keys"),
    ("runs:\n  - {name: a}\n  - {name: a}\n", "two runs"),
    ("runs: [\n", "not valid YAML"),
    ("runs:\n  - {name: a, evaluate: r}\n", "not a nmtfrag-evaluation"),
])
def test_bad_runs_are_refused(runs, yaml_text, message):
    (runs / "bad.yaml").write_text(yaml_text)
    with pytest.raises(InputError, match=message):
        compare_runs(str(runs / "bad.yaml"), str(runs / "o"))


def test_notes_are_computed_from_the_table(runs):
    """Each note is true of the table it is under: the cells named as shortening the
    output are exactly those more than 0.05 below the baseline's length ratio."""
    from nmtfrag.audit.compare_notes import table_notes

    rows = [{"name": "baseline", "bleu": 10.0, "length_ratio": 1.00},
            {"name": "a", "bleu": 12.0, "length_ratio": 0.96, "p_bleu": 0.01},
            {"name": "b", "bleu": 9.0, "length_ratio": 0.94, "p_bleu": 0.02},
            {"name": "sent", "bleu": 14.0, "length_ratio": 0.57, "p_bleu": 0.001},
            {"name": "c", "bleu": 11.0, "length_ratio": 1.30, "p_bleu": 0.4,
             "exposure": {"0": {"extracted": 0}, "5": {"extracted": 1}},
             "membership": {"auc": 0.74, "auc_once": 0.647}}]
    notes = table_notes(rows)
    short = next(n for n in notes if n.startswith("Output shorter"))
    named = {r["name"] for r in rows if r["name"] != "baseline"
             and r["length_ratio"] < 1.00 - 0.05}
    assert named == {"b", "sent"}
    assert all(f"{n} (" in short for n in named) and "a (" not in short
    assert "c (" not in short
    assert "above the baseline's at p < 0.05: a, sent; below it: b (of 4 tested)" in \
        " ".join(notes)
    assert "kept: a 50%, b -25%, c 25%." in " ".join(notes)
    assert "output verbatim by: c." in " ".join(notes)
    assert ("holds once (in brackets: on those it repeats, where measured, then on all "
            "sampled pairs): c 0.647 (0.740)." in " ".join(notes))
    rows[4]["membership"]["auc_repeated"] = 0.770
    assert "pairs): c 0.647 (0.770; 0.740)." in " ".join(table_notes(rows))
    del rows[4]["membership"]["auc_repeated"]
    assert not any("same files" in n for n in table_notes(rows))
    rows[4]["membership"].update(auc_same_files=0.55, auc_once_same_files=0.52)
    assert ("not train on (cells on a share of the corpus: the same documents, so what the "
            "attack reads of the pairs alone; in brackets: on the pairs held once, then the "
            "figure against the held-out test pairs): c 0.550 (0.520; 0.740)."
            in " ".join(table_notes(rows)))
    del rows[4]["membership"]["auc_same_files"]
    # an audit without the split (an older one) is not named
    assert not any("holds once" in n for n in table_notes(
        [{"name": "d", "membership": {"auc": 0.7, "auc_once": None}}]))
    assert not any("Target" in n for n in notes)  # no release audited: no n-gram note
    rows[1]["reconstruction"] = {"max_len": 4, "tgt_ngrams_by_order": {"5": 0.2, "8": 0.1}}
    rows[2]["reconstruction"] = {"max_len": 7, "tgt_ngrams_by_order": {"8": 0.3}}
    assert "Target 8-grams rebuilt (one order for every release: no fragment of any " \
        "holds one): a 10.00%, b 30.00%." in table_notes(rows)
    only = [rows[0], rows[3]]  # the baseline and full sentences: no share to list
    assert not any(n.startswith("Share") for n in table_notes(only))
    assert not any("gained nothing" in n for n in table_notes(only))  # it gained
    noise = [rows[0], dict(rows[3], bleu=10.5, p_bleu=0.3)]
    assert any("gained nothing measurable over the baseline (+0.50 BLEU, p = 0.300)" in n
               for n in table_notes(noise))
    # c's output is 30% too long: named like a too-short one
    assert "Output longer than the baseline's (length ratio more than 0.05 above its " \
        "1.00): c (1.30)." in table_notes(rows)
    rows[2]["length_ratio"] = rows[3]["length_ratio"] = 0.99
    rows[4]["length_ratio"] = 1.02
    assert "No cell's length ratio is more than 0.05 off the baseline's (1.00)." in \
        table_notes(rows)


def test_membership_and_exposure_below_their_noise_floor_are_called_noise():
    """An AUC of 0.42 on 50 + 50 pairs is within two standard errors of 0.5 (±0.116):
    noise; 0.35 lies below chance beyond it: no protection either; planted canaries no
    more exposed than never-planted ones at 50 samples are noise too; a real signal is
    not called noise."""
    rows = [{"name": "x", "membership": {"auc": 0.42, "members": 50, "non_members": 50},
             "exposure": {"0": {"exposure_mean": 3.41}, "1": {"exposure_mean": 2.0},
                          "5": {"exposure_mean": 9.0}}, "exposure_samples": 50},
            {"name": "y", "membership": {"auc": 0.85, "members": 1000, "non_members": 1000},
             "exposure": {"0": {"exposure_mean": 1.0}, "1": {"exposure_mean": 4.0}}}]
    text = " ".join(table_notes(rows))
    assert "within sampling noise of chance" in text and "x 0.420 (n = 50 + 50, ±0.116)" \
        in text and "y 0.850" not in text
    rows[0]["membership"]["auc"] = 0.35
    assert "below chance beyond that noise: x 0.350" in " ".join(table_notes(rows))
    assert "x (r=0: 3.41 bits ≥ r=1; 50 samples, about 5.6 bits resolved)" in text
    assert "y (r=0" not in text



def test_exact_exposures_are_not_called_noise():
    """Exposures computed by enumerating every candidate secret (exposure_exact) carry
    no sampling noise: an exact floor puts nothing in the noise note, and an exact planted
    count is not named beside a sampled floor."""
    from nmtfrag.audit.compare_notes import exposure_floor_notes

    def row(exact):
        return {"name": "x", "exposure_samples": 50, "exposure_exact": exact,
                "exposure": {"0": {"exposure_mean": 3.41}, "1": {"exposure_mean": 2.0},
                             "5": {"exposure_mean": 3.0}}}

    assert "x (r=0: 3.41 bits ≥ r=1, r=5;" in " ".join(exposure_floor_notes([row([])]))
    assert exposure_floor_notes([row(["0", "1", "5"])]) == []
    assert exposure_floor_notes([row(["0"])]) == []
    assert "x (r=0: 3.41 bits ≥ r=5;" in " ".join(exposure_floor_notes([row(["1"])]))
    assert exposure_floor_notes([row(["1", "5"])]) == []


def test_the_baseline_is_the_floor_not_a_run_with_noisy_canaries():
    """The baseline never saw a canary: its 'planted' counts are never-planted ones too,
    so it is not listed as a run whose planted exposures are noise; a fine-tuned run with
    the same figures is."""
    from nmtfrag.audit.compare_notes import exposure_floor_notes

    def row(name, approach=None):
        return {"name": name, "approach": approach, "exposure_samples": 1000,
                "exposure": {"0": {"exposure_mean": 1.74}, "10": {"exposure_mean": 0.84}}}

    text = " ".join(exposure_floor_notes([row("baseline"), row("phrases")]))
    assert "phrases (r=0: 1.74 bits ≥ r=10" in text and "baseline (r=0" not in text
    assert exposure_floor_notes([row("base-model", "no fine-tuning")]) == []


def test_the_table_records_which_repeat_counts_were_enumerated(runs):
    """collect: a repeat count is exact when every canary planted that often was
    enumerated; one sampled canary makes its count sampled."""
    rep = _exposure(1.2, 1.0)
    rep["canaries"] = [
        {"name": "a", "secret": "1", "repeats": 0, "exposure": 1.0, "method": "enumerated"},
        {"name": "b", "secret": "2", "repeats": 0, "exposure": 1.0, "method": "enumerated"},
        {"name": "c", "secret": "3", "repeats": 100, "exposure": 1.2,
         "method": "enumerated"},
        {"name": "d", "secret": "4", "repeats": 100, "exposure": 1.2,
         "method": "skew-normal"}]
    _w(runs / "x" / "base.json", rep)
    by = {r["name"]: r for r in compare_runs(str(runs / "runs.yaml"),
                                             str(runs / "out"))["runs"]}
    assert by["baseline"]["exposure_exact"] == ["0"]
    assert by["phrases"]["exposure_exact"] == []  # an audit that names no canaries


def test_no_share_when_the_reference_gain_is_within_its_own_interval():
    from nmtfrag.audit.compare_reference import gain_shares

    rows = [{"name": "baseline", "bleu": 10.0},
            {"name": "sent", "bleu": 12.86, "p_bleu": 0.01, "bleu_mean": 12.0,
             "bleu_ci95": 2.5},
            {"name": "c", "bleu": 8.0, "p_bleu": 0.01}]
    assert gain_shares(rows) is None
    assert any("its 95% interval reaches the baseline" in n for n in table_notes(rows))
    rows[1]["bleu_ci95"] = 1.0
    assert gain_shares(rows)["c"][0] == pytest.approx(-2 / 2.86)


def test_a_share_interval_comes_from_the_bootstrap_and_its_point_from_bleu():
    """Where the bootstrap's mean differs from the BLEU, the share is (BLEU − base) /
    gain and its interval (mean ± ci − base) / gain: neither end taken from the other."""
    from nmtfrag.audit.compare_reference import gain_shares

    rows = [{"name": "baseline", "bleu": 10.0},
            {"name": "sent", "bleu": 30.0, "p_bleu": 0.001},
            {"name": "c", "bleu": 20.0, "p_bleu": 0.01, "bleu_mean": 21.0, "bleu_ci95": 1.0}]
    share, low, high = gain_shares(rows)["c"]
    assert share == pytest.approx(0.5)
    assert low == pytest.approx(0.5) and high == pytest.approx(0.6)


def test_cli(runs):
    cmd = [sys.executable, "-m", "nmtfrag", "audit", "compare", "--runs",
           str(runs / "runs.yaml"), "--out", str(runs / "c")]
    assert subprocess.run(cmd, capture_output=True).returncode == 0
    again = subprocess.run(cmd, capture_output=True, text=True)
    assert again.returncode == 2 and again.stderr.startswith("error:")


def test_reconstruction_figures_are_the_strongest_mode(tmp_path):
    """With --mode both the report's top-level scores are the conservative floor; the
    comparison must show, per figure, the mode that rebuilt more (never understate)."""
    import copy

    cons = copy.deepcopy(RECON["scores"])
    greedy = copy.deepcopy(RECON["scores"])
    greedy["pair"]["rebuilt_exactly_share"] = 0.02  # greedy rebuilds more pairs …
    greedy["tgt"]["ngrams_recovered_share"] = 0.10  # … but fewer n-grams here
    rep = dict(RECON, mode="both", scores=cons,
               modes={"conservative": {"scores": cons}, "greedy": {"scores": greedy}})
    _w(tmp_path / "e" / "report.json", _eval(12.0))
    _w(tmp_path / "r" / "report.json", rep)
    (tmp_path / "runs.yaml").write_text(
        "runs:\n  - {name: phr, evaluate: e, reconstruction: r}\n")
    row = compare_runs(str(tmp_path / "runs.yaml"), str(tmp_path / "out"))["runs"][0]
    rec = row["reconstruction"]
    assert rec["pairs_rebuilt_share"] == 0.02
    assert rec["strongest_mode"]["pairs_rebuilt_share"] == "greedy"
    assert rec["tgt_ngrams_recovered_share"] == 0.14
    assert rec["strongest_mode"]["tgt_ngrams_recovered_share"] == "conservative"
    assert rec["modes"] == ["conservative", "greedy"]
    assert "| 2.00% | 14.00% |" in (tmp_path / "out" / "report.md").read_text()


def test_no_canary_columns_or_legend_without_canaries():
    """The legend explains the columns the table has: no canary measured, no exposure or
    extraction column, and no word about them under the table."""
    from nmtfrag.audit.compare import render_markdown

    md = render_markdown("t", [{"name": "a", "approach": "x", "bleu": 1.0}])
    assert "exposure" not in md.lower() and "extracted" not in md.lower()
    md = render_markdown("t", [{"name": "a", "approach": "x", "bleu": 1.0, "exposure": {
        "10": {"exposure_mean": 2.0, "extracted": 1, "canaries": 3}}}])
    assert "| exposure r=10 | extracted (planted) |" in md and "| 2.00 | 1/3 |" in md
    assert "Exposure r=k" in md
