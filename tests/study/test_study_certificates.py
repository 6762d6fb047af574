"""The study report's ε: every DP cell's certificate goes through `nmtfrag privacy`'s check;
a refused one shows no ε and says why; a stated ε that is no guarantee (seeded, chosen on
private data, a base model trained on the owner's data) carries its label in the main
table, the ε column of the leakage table and the DP-SGD table; what lies outside each ε
comes from the cell's recorded inputs."""
import json

from certfiles import training_entry, write_model, write_release
from test_study_config import GOOD, write

from nmtfrag.audit.compare import epsilon_text
from nmtfrag.study.config import read_config
from nmtfrag.study.plan import Paths
from nmtfrag.study.privacy_figures import privacy_figures
from nmtfrag.study.report import render_markdown
from test_study_config import ws  # noqa: F401 (fixture)


def _row(config, out, name):
    return {"name": name, "approach": "x", **privacy_figures(config, Paths(str(out)), name)}


def test_an_edited_certificate_is_refused_and_a_labelled_one_marked_in_every_table(ws):
    text = GOOD.replace('options = ["--dp-steps", "3"]',
                        'options = ["--dp-steps", "3"]\ntuned_on = "private"')
    config = read_config(write(ws, text))
    out = ws / "OUT"
    rel = out / "cells" / "rel8" / "release"
    write_release(rel)
    cert = json.loads((rel / "privacy.json").read_text())
    cert["release"]["epsilon"] = 0.5  # an edit nmtfrag privacy refuses
    (rel / "privacy.json").write_text(json.dumps(cert))
    write_model(out / "cells" / "dp8" / "finetune",
                training_entry(sigma=1.0, q=0.01, steps=1000, seeded=True))
    rel_row, sgd_row = _row(config, out, "rel8"), _row(config, out, "dp8")
    assert rel_row["epsilon"] is None and rel_row["epsilon_stated"] is None
    assert "certificate refused" in rel_row["privacy"] and "release.epsilon" in \
        rel_row["privacy"]
    assert sgd_row["epsilon"] is None and sgd_row["epsilon_stated"] > 0
    assert "seeded: not private" in sgd_row["epsilon_labels"]
    assert any("chosen on private data" in x for x in sgd_row["epsilon_labels"])
    assert "seeded" in epsilon_text(sgd_row) and "chosen on private data" in \
        epsilon_text(sgd_row)
    md = render_markdown(config, [rel_row, sgd_row])
    table = md.split("## DP-SGD cells")[1]
    assert "seeded: not private" in table and "chosen on private data" in table
    assert "certificate refused" in md.split("## What each ε covers")[0]


def test_a_base_model_trained_on_the_owners_data_is_named_outside_every_epsilon(ws):
    text = GOOD.replace('dir = "{d}/model"', 'dir = "{d}/model"\nowner_data = true')
    config = read_config(write(ws, text))
    out = ws / "OUT"
    write_release(out / "cells" / "rel8" / "release")
    row = _row(config, out, "rel8")
    assert row["epsilon"] is None and row["epsilon_stated"] > 0
    assert any("base model's own training data" in x for x in row["outside_epsilon"])
    assert any("base model trained on the owner's data" in x for x in row["epsilon_labels"])


def test_a_cached_check_is_redone_when_the_output_changes(ws):
    """The report keeps each check while the output's files are unchanged; an edit after
    a passing check is refused at the next report."""
    config = read_config(write(ws, GOOD))
    out = ws / "OUT"
    rel = out / "cells" / "rel8" / "release"
    write_release(rel)
    assert _row(config, out, "rel8")["epsilon"] is not None
    assert (out / "report" / "certificates" / "rel8.json").exists()
    (rel / "phrases.en").write_text("<P> a whole sentence of the owner </P>\n")
    row = _row(config, out, "rel8")
    assert row["epsilon"] is None and "phrases.en" in row["privacy"]


def test_a_cell_chosen_on_the_first_test_lines_is_rescored_without_them(ws):
    """EMEA's DP recipe was chosen on its first 500 test lines: the report scores such a
    cell, the baseline and the full cell on the other lines only, from their hypotheses."""
    from sacrebleu.metrics import BLEU

    from nmtfrag.study import selection_section

    text = GOOD.replace('options = ["--dp-steps", "3"]',
                        'options = ["--dp-steps", "3"]\nchosen_on_test_lines = 2')
    config = read_config(write(ws, text))
    refs = (ws / "data" / "test.en").read_text().splitlines()
    hyps = {"baseline": ["x"] * len(refs), "sent": refs, "dp8": refs[:2] + ["x y"] * 3}
    for name, h in hyps.items():
        d = ws / "OUT" / "cells" / name / "evaluate"
        d.mkdir(parents=True)
        (d / "hyp.txt").write_text("".join(x + "\n" for x in h))
    rows = [{"name": n} for n in hyps]
    (entry,) = selection_section.rescored(config, str(ws / "OUT"), rows)
    assert entry["lines"] == len(refs) - 2 and entry["skipped"] == 2
    assert entry["bleu"] == round(BLEU().corpus_score(hyps["dp8"][2:], [refs[2:]]).score, 2)
    assert entry["bleu_full"] == 100.0
    assert "first 2 left out" in "\n".join(selection_section.render([entry]))


def test_a_same_size_edit_that_keeps_the_mtime_is_still_checked_again(ws):
    """The cached check is keyed on the output's bytes, not on sizes and times: an edit
    that keeps a bound file's size and modification time is refused at the next report."""
    import os

    config = read_config(write(ws, GOOD))
    out = ws / "OUT"
    rel = out / "cells" / "rel8" / "release"
    write_release(rel)
    assert _row(config, out, "rel8")["epsilon"] is not None
    phrases = rel / "phrases.en"
    st = os.stat(phrases)
    old = phrases.read_text()
    new = old.replace("house", "mouse")
    assert len(new) == len(old) and new != old
    phrases.write_text(new)
    os.utime(phrases, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(phrases).st_size == st.st_size
    row = _row(config, out, "rel8")
    assert row["epsilon"] is None and "phrases.en" in row["privacy"]


def test_a_refusal_caused_by_a_read_error_is_not_kept(ws, monkeypatch):
    """A certificate that could not be read (a passing I/O fault) is checked again at the
    next report; only a refusal of what was read is kept."""
    from nmtfrag.dp import certificate
    from nmtfrag.errors import InputError

    config = read_config(write(ws, GOOD))
    out = ws / "OUT"
    write_release(out / "cells" / "rel8" / "release")
    real = certificate.read_certificate

    def fails(directory):
        try:
            raise OSError(5, "Input/output error")
        except OSError as exc:
            raise InputError(f"{directory}: cannot read privacy.json") from exc

    monkeypatch.setattr(certificate, "read_certificate", fails)
    row = _row(config, out, "rel8")
    assert row["epsilon"] is None and "cannot read" in row["privacy"]
    assert not (out / "report" / "certificates" / "rel8.json").exists()
    monkeypatch.setattr(certificate, "read_certificate", real)
    assert _row(config, out, "rel8")["epsilon"] is not None


COMPOSED = """[[cell]]
name = "comp8"
approach = "dp-composed"
epsilon = 8
release_epsilon = 3
options = ["--dp-steps", "3"]
"""


def test_a_release_cell_whose_trained_model_has_no_certificate_shows_no_epsilon(ws):
    """A dp-release cell's ε is the release's only where its fine-tuned model carries
    the release's certificate; otherwise the main table says why it does not."""
    config = read_config(write(ws, GOOD))
    out = ws / "OUT"
    write_release(out / "cells" / "rel8" / "release")
    ft = out / "cells" / "rel8" / "finetune"
    ft.mkdir(parents=True)
    (ft / "manifest.json").write_text(json.dumps(
        {"kind": "nmtfrag-finetuned-model", "dp": True}))
    stated = _row(config, out, "rel8")["epsilon"]
    assert stated is not None
    (ft / "manifest.json").write_text(json.dumps(
        {"kind": "nmtfrag-finetuned-model", "dp": False,
         "no_certificate": "it validated on the owner's data"}))
    row = _row(config, out, "rel8")
    assert row["epsilon"] is None and row["epsilon_stated"] == stated
    assert row["epsilon_labels"] == [
        "the trained model carries no certificate: it validated on the owner's data"]
    (ft / "manifest.json").write_text(json.dumps({"kind": "nmtfrag-finetuned-model"}))
    assert "its fine-tuning read more than the release" in \
        _row(config, out, "rel8")["privacy"]


def test_a_composed_cell_whose_dp_sgd_composed_no_release_shows_no_epsilon(ws):
    """A dp-composed cell's total covers the release only when its DP-SGD certificate
    composed it (earlier_releases): one that did not is labelled, not printed as ε."""
    from nmtfrag.study.privacy_figures import model_uncertified

    config = read_config(write(ws, GOOD + COMPOSED))
    out = ws / "OUT"
    write_model(out / "cells" / "comp8" / "finetune", training_entry(sigma=1.0, q=0.01,
                                                                     steps=1000))
    row = _row(config, out, "comp8")
    assert row["epsilon"] is None and row["epsilon_stated"] > 0
    assert any("composed no release" in x for x in row["epsilon_labels"])
    paths = Paths(str(out))
    assert model_uncertified("dp-composed", paths, "comp8",
                             {"earlier_releases": [{"epsilon": 3.0}]}) == []
    assert model_uncertified("dp-composed", paths, "comp8", {}) == []  # no certificate
    assert model_uncertified("dp-sgd", paths, "dp8", {"total": {}}) == []


def _rescored(ws, hyps, chosen=2, test_lines=None):
    """selection_section.rescored for dp8 chosen on the first `chosen` test lines, with
    the given hypotheses per cell (test_lines: a test set of that many lines)."""
    from tinymodel import make_corpus, write_parallel

    from nmtfrag.study import selection_section

    if test_lines is not None:
        write_parallel(make_corpus(test_lines, seed=5), str(ws / "data" / "test"))
    text = GOOD.replace('options = ["--dp-steps", "3"]',
                        f'options = ["--dp-steps", "3"]\nchosen_on_test_lines = {chosen}')
    config = read_config(write(ws, text))
    refs = (ws / "data" / "test.en").read_text().splitlines()
    for name, h in hyps(refs).items():
        d = ws / "OUT" / "cells" / name / "evaluate"
        d.mkdir(parents=True, exist_ok=True)
        (d / "hyp.txt").write_text("".join(x + "\n" for x in h))
    (entry,) = selection_section.rescored(config, str(ws / "OUT"),
                                          [{"name": n} for n in hyps(refs)])
    return entry, "\n".join(selection_section.render([entry]))


def test_a_rescored_cell_whose_hypotheses_do_not_match_the_references_gets_a_note(ws):
    entry, text = _rescored(ws, lambda refs: {"baseline": ["x"] * len(refs), "sent": refs,
                                              "dp8": refs[:-1]})
    assert "differ in length" in entry["note"] and "bleu" not in entry
    assert "differ in length" in text


def test_a_cell_chosen_on_every_test_line_gets_a_note_not_a_silent_gap(ws):
    entry, text = _rescored(ws, lambda refs: {"baseline": ["x"] * len(refs), "sent": refs,
                                              "dp8": refs}, chosen=5)
    assert entry["name"] == "dp8" and "every scored line" in entry["note"]
    assert "every scored line" in text


def test_the_share_of_the_gain_needs_a_significant_gain_of_the_full_cell(ws):
    """The share is the cell's gain over the full cell's, on the lines after the choice:
    given where the full cell's own gain is significant, not where it is noise."""
    def hyps(one_better):
        def make(refs):
            full = ["x"] * len(refs)
            for i in range(2, 2 + one_better):
                full[i] = refs[i]
            return {"baseline": ["x"] * len(refs), "sent": full, "dp8": full}
        return make

    entry, _ = _rescored(ws, hyps(1), test_lines=40)
    assert entry["bleu_full"] > entry["bleu_baseline"] and entry["share"] is None
    entry, _ = _rescored(ws, hyps(30), test_lines=40)
    assert entry["bleu_full"] > entry["bleu_baseline"] and entry["share"] == 1.0
