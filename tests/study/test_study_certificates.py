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
