"""The docs say what the command does now: docs/reference/commands.md is what
scripts/gen_reference.py writes from the parsers (regenerate it when an option or a help
text changes), the README's examples parse, and CI runs the README's set-up commands."""
import importlib.util
import os
import re
import shlex

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "reference", "commands.md")
STALE = "docs/reference/commands.md is stale: run `python3 scripts/gen_reference.py`"


def _generator():
    spec = importlib.util.spec_from_file_location(
        "gen_reference", os.path.join(ROOT, "scripts", "gen_reference.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _generator()


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def written_by(page):
    """The Python version named in the page's header ('3.11')."""
    m = re.search(r"with Python (\d+\.\d+)'s argparse", page)
    return m.group(1) if m else None


def sections(page):
    """{command line: its help text} of a commands page."""
    return {m.group(1): m.group(2) for m in re.finditer(
        r"^#{2,6} (nmtfrag(?: [\w-]+)*)\n\n```text\n(.*?)\n```$", page, re.M | re.S)}


def stale_options(page):
    """What the page says about commands and options that the parsers do not, and what it
    leaves out: a check that does not depend on how a Python version lays out --help."""
    from nmtfrag.cli import build_parser

    parsers = dict(gen.commands(build_parser()))
    found = sections(page)
    problems = [f"{c}: not in the page" for c in parsers if c not in found]
    problems += [f"{c}: no such command" for c in found if c not in parsers]
    for name, parser in parsers.items():
        text = found.get(name)
        if text is None:
            continue
        strings = {s for a in parser._actions for s in a.option_strings}
        shown = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", text))
        problems += [f"{name} {s}: not in the page" for s in sorted(strings - shown)]
        for line in text.split("\n"):
            m = re.match(r"^  (--?[A-Za-z][\w-]*)", line)
            if m and m.group(1) not in strings:
                problems.append(f"{name} {m.group(1)}: in the page, not an option")
    return problems


def test_the_command_reference_is_what_the_parsers_print_now():
    committed = _read(PAGE)
    assert not stale_options(committed), STALE + "\n" + "\n".join(stale_options(committed))
    version = gen.python_version()
    if written_by(committed) != version:
        pytest.skip(f"page written with Python {written_by(committed)}'s argparse, this is "
                    f"{version}: its layout differs, so only the commands and options "
                    "were compared")
    assert committed == gen.generate(), STALE


def test_the_reference_covers_every_command_and_subcommand():
    found = sections(_read(PAGE))
    for name in ("nmtfrag", "nmtfrag extract", "nmtfrag align-model", "nmtfrag finetune",
                 "nmtfrag evaluate", "nmtfrag translate", "nmtfrag vocab", "nmtfrag privacy",
                 "nmtfrag split", "nmtfrag stats", "nmtfrag opus2tsv", "nmtfrag audit",
                 "nmtfrag audit reconstruct", "nmtfrag audit canaries",
                 "nmtfrag audit canaries insert", "nmtfrag audit exposure",
                 "nmtfrag audit membership", "nmtfrag audit compare", "nmtfrag study",
                 "nmtfrag study run", "nmtfrag study status", "nmtfrag study report"):
        assert name in found and found[name].startswith("usage: " + name), name


def test_a_stale_option_or_help_is_found():
    page = gen.generate()
    assert not stale_options(page)
    # an option renamed in the code but not in the page: the page has the old name
    head, extract, tail = page.partition(sections(page)["nmtfrag extract"])
    renamed = head + extract.replace("--keep-work", "--keep-tmp") + tail
    assert renamed != page
    problems = stale_options(renamed)
    assert "nmtfrag extract --keep-work: not in the page" in problems, problems
    assert "nmtfrag extract --keep-tmp: in the page, not an option" in problems, problems
    # a command added in the code but not in the page
    dropped = re.sub(r"\n### nmtfrag study status\n.*?```\n", "\n", page, count=1, flags=re.S)
    assert "nmtfrag study status: not in the page" in stale_options(dropped)
    reworded = page.replace("show this help message and exit", "show the help", 1)
    assert reworded != gen.generate()  # the byte-for-byte check catches any other edit


def test_the_generator_script_runs(tmp_path):
    out = tmp_path / "commands.md"
    assert gen.main(["--out", str(out)]) == 0
    assert gen.main(["--check", "--out", str(out)]) == 0
    out.write_text(out.read_text(encoding="utf-8") + "edited\n", encoding="utf-8")
    assert gen.main(["--check", "--out", str(out)]) == 1


def readme_examples():
    """The `nmtfrag …` examples of the README's command table."""
    found = []
    for line in _read(os.path.join(ROOT, "README.md")).split("\n"):
        if line.startswith("| [`"):
            example = line.rstrip(" |").rsplit("| `", 1)[1].rstrip("`")
            example = example.replace("\\|", "|").rsplit("| ", 1)[-1]
            # leading VAR=value assignments (MODELS=… DATA=… nmtfrag study run …)
            words = shlex.split(example)
            while words and "=" in words[0] and not words[0].startswith("-"):
                words.pop(0)
            found.append(shlex.join(words))
    return found


def test_the_readme_lists_every_command_with_an_example_that_parses():
    from nmtfrag.cli import COMMANDS, build_parser

    examples = readme_examples()
    assert [shlex.split(e)[1] for e in examples] == [name for name, _ in COMMANDS]
    parser = build_parser()
    for example in examples:
        argv = shlex.split(example)
        assert argv[0] == "nmtfrag", example
        try:
            parser.parse_args(argv[1:])
        except SystemExit as exc:
            pytest.fail(f"README example does not parse ({exc.code}): {example}")


def test_ci_runs_the_readme_set_up_commands_verbatim():
    readme = _read(os.path.join(ROOT, "README.md"))
    blocks = re.findall(r"^```\n(.*?)\n```$", readme, re.M | re.S)
    setup = [b.split("\n") for b in blocks if "bash scripts/install.sh" in b]
    assert setup == [["bash scripts/install.sh", "python3 -m pytest -q tests"]], setup
    ci = [line for line in _read(os.path.join(ROOT, ".ci", "run")).split("\n")
          if line and not line.startswith(("#", "set ", "cd "))]
    assert ci == setup[0]

