"""The report's length-against-precision section: BLEU / BP is sacrebleu's precision part,
and its share of the full-sentence gain tells a cell that lost its gain to length."""
import math

import sacrebleu

from nmtfrag.study.length import precision_bleu, precision_shares, render

REFS = ["the patient should take two tablets a day with water",
        "do not use this medicine after the expiry date",
        "keep out of the reach and sight of children"]


def _row(name, hyps, approach=""):
    s = sacrebleu.corpus_bleu(hyps, [REFS])
    return {"name": name, "approach": approach, "bleu": s.score, "brevity_penalty": s.bp,
            "precisions": list(s.precisions), "length_ratio": s.sys_len / s.ref_len}


def test_bleu_over_bp_is_the_geometric_mean_of_sacrebleus_precisions():
    row = _row("x", ["the patient should take tablets with water",
                     "do not use this medicine",
                     "keep out of the reach of children"])
    assert row["brevity_penalty"] < 1  # short output: the penalty applies
    geo = math.exp(sum(math.log(p) for p in row["precisions"]) / 4)
    assert math.isclose(precision_bleu(row), geo, rel_tol=1e-9)


def test_a_short_precise_cell_keeps_its_gain_in_precision_not_in_bleu():
    rows = [_row("baseline", ["the patient must take two pills daily with some water",
                              "this drug should not be used after it expires",
                              "store it where children cannot see or reach it"],
                 "no fine-tuning"),
            _row("sent", REFS[:2] + ["keep out of the reach of children"], "full sentences"),
            # the domain's words, cut short
            _row("short", ["the patient should take two tablets", "do not use this medicine",
                           "keep out of the reach"])]
    shares = precision_shares(rows)
    assert shares["baseline"] == 0 and math.isclose(shares["sent"], 1)
    base, full, short = (r["bleu"] for r in rows)
    rows[2]["share_of_gain"] = (short - base) / (full - base)
    assert shares["short"] - rows[2]["share_of_gain"] >= 0.2  # length took the gain back
    md = "\n".join(render(rows))
    assert "## Length against precision" in md and "Here: short " in md
    assert f"| short | {short:.2f} | {rows[2]['brevity_penalty']:.3f} |" in md


def test_no_section_without_the_figures_and_no_share_without_a_gain():
    assert render([{"name": "a", "bleu": 1.0}]) == []
    same = _row("sent", REFS, "full sentences")
    assert precision_shares([dict(same, name="baseline", approach="no fine-tuning"),
                             same]) == {}


def test_a_collapsed_cell_is_not_said_to_have_gained_precision():
    """short output with no precision gain (a model that stops after a word or two) lost
    nothing to length: it learned nothing"""
    rows = [{"name": "baseline", "approach": "no fine-tuning", "bleu": 15.0,
             "brevity_penalty": 0.9, "precisions": [50.0, 22.0, 11.0, 6.0]},
            {"name": "sent", "approach": "full sentences", "bleu": 29.0, "p_bleu": 0.001,
             "brevity_penalty": 0.92, "precisions": [61.0, 37.0, 25.0, 18.0]},
            {"name": "collapsed", "bleu": 0.5, "brevity_penalty": 0.03,
             "precisions": [48.0, 21.0, 12.0, 7.0], "share_of_gain": -1.0}]
    assert precision_shares(rows)["collapsed"] < 0.2
    assert "Here:" not in "\n".join(render(rows))
    # a full-sentence gain within the bootstrap's noise gives no shares at all
    rows[1]["p_bleu"] = 0.2
    assert precision_shares(rows) == {}
