"""scripts/publish_study_report.py: the report copied unedited but for its figure link, and
one that names an absolute path refused (docs/ is shared, a path is the owner's)."""
import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _publish():
    spec = importlib.util.spec_from_file_location(
        "publish_study_report", os.path.join(ROOT, "scripts", "publish_study_report.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.publish


def _study(tmp_path, text, figure=True):
    rep = tmp_path / "study" / "report"
    rep.mkdir(parents=True)
    (rep / "report.md").write_text(text, encoding="utf-8")
    if figure:
        (rep / "privacy_utility.png").write_bytes(b"png")
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    return str(tmp_path / "study"), str(docs)


def test_the_copy_is_the_report_with_its_figure_beside_it(tmp_path):
    body = "# Study: t\n\n| a | 1/2 |\n\n![privacy-utility](privacy_utility.png)\n"
    out, docs = _study(tmp_path, body)
    path = _publish()(out, "study-t", docs)
    text = open(path, encoding="utf-8").read()
    assert text.startswith("<!-- copied by scripts/publish_study_report.py")
    assert text.split("\n", 1)[1] == body.replace("(privacy_utility.png)",
                                                  "(study-t-privacy-utility.png)")
    assert open(os.path.join(docs, "study-t-privacy-utility.png"), "rb").read() == b"png"


@pytest.mark.parametrize("leak", ["see /home/owner/emea/train.de", "`/data/x/`",
                                  "C:\\Users\\owner"])
def test_a_report_naming_an_absolute_path_is_refused(tmp_path, leak):
    out, docs = _study(tmp_path, f"# Study\n\n{leak}\n")
    with pytest.raises(SystemExit, match="absolute path"):
        _publish()(out, "s", docs)
    assert os.listdir(docs) == []
