"""report.md of a reconstruction audit: recall and precision of each attack mode side by side.

Why a separate module: the report must say what its figures are (what one named attack
achieves, a lower bound on leakage) and, when both modes ran, put the conservative floor
next to the greedy guesses so that a reader sees the bracket, not one number.
"""
from __future__ import annotations

from .compare_notes import pct as _pct  # one percent formatter for every audit table


def _span(d):
    return f"{d['median']} ({d['p90']}, {d['max']})" if d else "–"


def summary_line(report: dict) -> str:
    """The one-line summary of the audit, made of the figures report.md shows (the same
    rounding, "–" where report.md has "–"), so that the two never disagree."""
    L = report["max_len"]
    parts = []
    for mode, r in report["modes"].items():
        s = r["scores"]
        parts.append(f"{mode}: {r['attack']['chains']} chains, sentence pairs rebuilt "
                     f"exactly {_pct(s['pair']['rebuilt_exactly_share'])}, target "
                     f"{L + 1}…{2 * L}-grams recovered "
                     f"{_pct(s['tgt']['ngrams_recovered_share'])}"
                     + (f" (no sentence is longer than {L} words)"
                        if s['tgt']['ngrams_recovered_share'] is None else ""))
    return "; ".join(parts)


SIDES = ("src", "tgt", "pair")


def render_markdown(report: dict) -> str:
    """report.md: what the figures are, the release, the assumptions, then the attack,
    recall, precision and n-gram tables with every mode side by side."""
    modes = list(report["modes"])
    res = report["modes"]
    L = report["max_len"]
    lines = _preamble(report, modes)
    lines += _attack_table(res, modes)
    lines += _recall_and_precision_tables(res, modes, L)
    lines += _ngram_table(res, modes, L)
    lines += ["", f"**Counting rule.** {report['counting_rule']} n-grams longer than max-len "
              "occur in no single fragment: each one recovered was assembled by the attack.",
              ""]
    return "\n".join(lines)


def _preamble(report, modes):
    """Title, the attack and its modes, what the figures are, the release, assumptions."""
    L = report["max_len"]
    p = report["release"]["params"]
    lines = [
        "# Reconstruction audit",
        "",
        f"**Attack:** {report['attack_name']}; mode{'s' if len(modes) > 1 else ''}: "
        f"{' and '.join(modes)}.",
        "",
        f"**What these figures are.** {report['lower_bound']} The conservative mode joins "
        "only overlaps the release makes unambiguous (a floor, near-perfect precision); the "
        "greedy mode also guesses at ambiguous overlaps by frequency and keeps the "
        "conservative chains too (more rebuilt, lower precision). Run both (`--mode both`) "
        "to bracket what this family of attacks gets.",
        "",
        f"Release: `{report['release']['dir']}` — {report['release']['lines']} phrase pairs, "
        f"max-len {report.get('max_len_stated', L) or 'not stated'} (n-grams counted from "
        f"{L + 1} words), sample-rate {p.get('sample_rate', '?')}, tag {p.get('tag', '?')}.",
        "",
    ]
    if report.get("assumptions"):
        lines += ["## Assumptions", ""] + [
            f"- {'**warning:** ' if a in report.get('warnings', []) else ''}{a}"
            for a in report["assumptions"]] + [""]
    return lines


def _attack_table(res, modes):
    """What each mode's attack did: fragments, joins, chains, time."""
    lines = [
        "## Attack",
        "",
        "| | " + " | ".join(modes) + " |",
        "|---|" + "---|" * len(modes),
    ]
    for label, key in (("fragments (distinct, widening variants collapsed)", "fragments"),
                       ("joins", "edges"),
                       ("… of which unambiguous (the conservative joins)",
                        "edges_unambiguous"),
                       ("… of which seen from one side only", "non_mutual_edges"),
                       ("ambiguous best overlaps resolved by frequency (either side)",
                        "ambiguous_overlaps_resolved_by_frequency"),
                       ("chains output", "chains"),
                       ("longest chain, target words", "longest_chain_tgt")):
        lines.append(f"| {label} | " + " | ".join(
            str(res[m]["attack"].get(key, res[m]["attack"]["edges"] if m == "conservative"
                                     and key == "edges_unambiguous" else "–"))
            for m in modes) + " |")
    lines.append("| seconds: attack / scoring | " + " | ".join(
        f"{res[m]['seconds']['attack']} / {res[m]['seconds']['scoring']}" for m in modes)
        + " |")
    return lines


def _row(label, get, res, modes):
    """A table row: `get(scores, side)` for each mode and side (a share, or text)."""
    cells = []
    for m in modes:
        for side in SIDES:
            v = get(res[m]["scores"], side)
            cells.append(v if isinstance(v, str) else _pct(v))
    return f"| {label} | " + " | ".join(cells) + " |"


def _side_only(key):
    """A `get` for `_row` of a figure that sources and targets have, pairs not."""
    return lambda s, side: s[side][key] if side != "pair" else ""


def _recall_and_precision_tables(res, modes, L):
    """How much of the corpus was rebuilt (recall), and how much of what the attack
    built is true (precision), per mode and side."""
    head = "| measure | " + " | ".join(f"{m}: {side}" for m in modes for side in
                                       ("source", "target", "pair")) + " |"
    rule = "|---|" + "---|" * (3 * len(modes))
    return [
        "",
        "## Rebuilt (recall)",
        "",
        head, rule,
        _row("sentences rebuilt exactly",
             lambda s, side: s[side]["rebuilt_exactly_share"], res, modes),
        _row(f"… of sentences longer than {L} words",
             lambda s, side: s[side]["rebuilt_exactly_longer_than_max_len_share"], res,
             modes),
        _row("… a chain equals the sentence (narrower count)",
             lambda s, side: s[side]["rebuilt_as_whole_chain_share"], res, modes),
        _row("… a released fragment equals the sentence (verbatim)",
             lambda s, side: s[side]["rebuilt_as_release_fragment_share"], res, modes),
        _row(f"distinct {L + 1}…{2 * L}-grams recovered",
             _side_only("ngrams_recovered_share"), res, modes),
        _row("longest recovered span, median (p90, max) words",
             lambda s, side: _span(s[side]["longest_span"]) if side != "pair" else "",
             res, modes),
        _row("longest span / sentence length, mean",
             lambda s, side: (_pct(s[side]["longest_span_share_of_sentence"].get("mean"))
                              if side != "pair" else ""), res, modes),
        "",
        "## Precision (how much of what the attack builds is true)",
        "",
        head, rule,
        _row(f"chain {L + 1}…{2 * L}-grams that occur in the corpus",
             _side_only("ngram_precision"), res, modes),
        _row("joined chains that occur inside one corpus line",
             lambda s, side: s["joined_chains"][f"{side}_precision"], res, modes),
        "| joined chains | " + " | ".join(
            str(res[m]["scores"]["joined_chains"]["joined_chains"]) if side == "pair" else ""
            for m in modes for side in SIDES) + " |",
        "",
        "A rebuilt sentence is checked against the corpus, so it is true by construction; "
        "what the attacker cannot check is its joins, hence the two precision figures.",
    ]


def _ngram_table(res, modes, L):
    """Target n-grams (max-len+1 … 2·max-len) recovered, per n and mode."""
    lines = [
        "",
        "## n-grams recovered, target side",
        "",
        "| n | distinct | " + " | ".join(
            f"{m}: recovered | {m}: occurrences recovered | {m}: precision" for m in modes)
        + " |",
        "|---|---|" + "---|" * (3 * len(modes)),
    ]
    first = {n: g for n, g in res[modes[0]]["scores"]["tgt"]["ngrams"].items()
             if g["distinct"]}  # none is longer than the longest sentence
    if not first:
        lines.append(f"| (no sentence is longer than {L} words) |")
    for n, g in first.items():
        cells = []
        for m in modes:
            h = res[m]["scores"]["tgt"]["ngrams"][n]
            cells += [_pct(h["distinct_recovered_share"]),
                      _pct(h["occurrences_recovered_share"]), _pct(h["precision"])]
        lines.append(f"| {n} | {g['distinct']} | " + " | ".join(cells) + " |")
    return lines
