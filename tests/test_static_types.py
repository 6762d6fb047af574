"""Static types: mypy on nmtfrag/ with the repo's configuration ([tool.mypy] in
pyproject.toml) reports no error.

Why in the test run: an annotation that lies (a None a function does not expect, a
keyword a constructor does not take) is found here, before a user runs the code path.
mypy runs in a subprocess with its cache in a temporary directory (about 10-15 s cold),
so the check sees the tree as it is and leaves nothing behind.
"""
import dataclasses
import inspect
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(REPO, "pyproject.toml")


def run_mypy(cache_dir, *args):
    """(exit status, report) of mypy with the repo's configuration, run from the repo
    root (the configuration's `files` names nmtfrag/)."""
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", CONFIG, "--cache-dir",
         str(cache_dir), "--no-color-output", "--no-error-summary", *args],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def test_nmtfrag_has_no_type_errors(tmp_path):
    status, report = run_mypy(tmp_path)
    assert status == 0, f"mypy found type errors in nmtfrag/:\n{report}"


def test_the_configuration_reports_errors(tmp_path):
    """A check that passes because the configuration silences everything is no check:
    the same configuration must refuse a wrong annotation."""
    broken = tmp_path / "broken.py"
    broken.write_text("count: int = 'not an int'\n")
    status, report = run_mypy(tmp_path / "cache", str(broken))
    assert status == 1 and "[assignment]" in report, report


def test_keyword_typeddicts_name_the_constructors_fields():
    """extract_release(**fields) and load_translator(**kwargs) are typed by TypedDicts
    that restate their constructors' keywords; mypy checks the calls only if the two
    agree, so a field added to one but not the other fails here."""
    from nmtfrag.translate.ct2_engine import CT2Translator
    from nmtfrag.fragment.extract import ExtractFields, ExtractOptions
    from nmtfrag.translate.fairseq_engine import Translator, TranslatorOptions

    assert set(ExtractFields.__annotations__) == \
        {f.name for f in dataclasses.fields(ExtractOptions)}
    engine_own = {"compute_type", "cache_dir", "threads"}  # load_translator's own names
    for engine in (Translator, CT2Translator):
        params = set(inspect.signature(engine.__init__).parameters) - {"self", "model_dir"}
        assert set(TranslatorOptions.__annotations__) == params - engine_own, engine
