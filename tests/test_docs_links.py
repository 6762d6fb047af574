"""Every relative link in README.md and docs/**/*.md resolves: the file or folder exists,
and a `#anchor` names a heading of the page it points to, as GitHub makes heading anchors
(lowercase; spaces to '-'; punctuation other than '-' and '_' removed; a repeated heading
gets -1, -2, …). Links inside code are not links; web links (http:, https:, mailto:) are
not checked (no network in the suite)."""
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FENCE = re.compile(r"^ {0,3}(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s[^>]*(?:name|id)=\"([^\"]+)\"", re.I)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def doc_files(root=ROOT):
    """README.md and every Markdown page under docs/, as paths relative to root."""
    found = ["README.md"] if os.path.exists(os.path.join(root, "README.md")) else []
    for d, _, files in os.walk(os.path.join(root, "docs")):
        found += [os.path.relpath(os.path.join(d, f), root) for f in files if f.endswith(".md")]
    return sorted(found)


def prose(text):
    """The text with fenced code blocks blanked (line numbers kept)."""
    out, fence = [], None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            out.append("")
        elif fence is not None:
            if line.strip().startswith(fence):
                fence = None
            out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def slug(heading):
    """GitHub's anchor of a heading's Markdown text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)   # links, images → their text
    text = re.sub(r"<[^>]+>", "", text)                           # HTML tags
    text = text.replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text.lower())                 # \w: Unicode letters, digits, _
    return text.replace(" ", "-")


def anchors(text):
    """Every anchor a page defines: its headings' slugs (repeats numbered) and HTML anchors."""
    seen, found = {}, set()
    for line in prose(text).split("\n"):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    found.update(HTML_ANCHOR.findall(text))
    return found


def links(text):
    """(line number, target) of every link and image outside code."""
    body = prose(text)
    body = CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", "x", m.group(0)), body)
    for m in LINK.finditer(body):
        yield body.count("\n", 0, m.start()) + 1, m.group(2)
    for m in REF_DEF.finditer(body):
        yield body.count("\n", 0, m.start()) + 1, m.group(1)


def broken_links(root=ROOT):
    """'page:line: target: why' for every relative link that does not resolve."""
    problems, cache = [], {}

    def page_anchors(path):
        if path not in cache:
            with open(path, encoding="utf-8") as f:
                cache[path] = anchors(f.read())
        return cache[path]

    for page in doc_files(root):
        full = os.path.join(root, page)
        with open(full, encoding="utf-8") as f:
            text = f.read()
        for line, target in links(text):
            where = f"{page}:{line}: {target}"
            if not target:
                problems.append(f"{where}: empty link")
                continue
            if SCHEME.match(target):
                continue
            path, _, anchor = target.partition("#")
            if path.startswith("/"):
                problems.append(f"{where}: absolute path (write it relative to the page)")
                continue
            dest = os.path.normpath(os.path.join(os.path.dirname(full), path)) if path else full
            if not os.path.exists(dest):
                problems.append(f"{where}: no such file")
                continue
            if not os.path.realpath(dest).startswith(os.path.realpath(root) + os.sep):
                problems.append(f"{where}: outside the repository")
                continue
            if anchor and dest.endswith(".md") and anchor not in page_anchors(dest):
                problems.append(f"{where}: no heading with anchor #{anchor} in "
                                f"{os.path.relpath(dest, root)}")
    return problems


def test_every_relative_link_and_anchor_resolves():
    assert doc_files() and "README.md" in doc_files()
    problems = broken_links()
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_no_path_of_a_developer_machine_in_user_docs():
    for page in doc_files():
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            for i, line in enumerate(f, 1):
                assert "../shared" not in line, f"{page}:{i}: {line.strip()}"


@pytest.mark.parametrize("heading, anchor", [
    ("Run a study: `nmtfrag study`", "run-a-study-nmtfrag-study"),
    ("A release with a guarantee: `extract --dp`", "a-release-with-a-guarantee-extract---dp"),
    ("The model: fairseq WMT19 German→English", "the-model-fairseq-wmt19-germanenglish"),
    ("`manifest.json` and `privacy.json`", "manifestjson-and-privacyjson"),
    ("What's new, (really)?", "whats-new-really"),
    ("snake_case and ε = 8", "snake_case-and-ε--8"),
    ("See [the guide](guide.md)", "see-the-guide"),
])
def test_slug_as_github_makes_it(heading, anchor):
    assert slug(heading) == anchor


def test_a_planted_broken_link_or_anchor_is_found(tmp_path):
    (tmp_path / "docs" / "guide").mkdir(parents=True)
    (tmp_path / "README.md").write_text(
        "# Top\n\n## Set up (Python 3.11)\n\n[ok](#set-up-python-311) [ok](docs/guide/a.md#the-a)\n"
        "[gone](docs/missing.md) [bad anchor](#set-up) [web](https://example.org/x#y)\n"
        "```\n[in a fence](nowhere.md)\n```\n`[in code](nowhere.md)`\n", encoding="utf-8")
    (tmp_path / "docs" / "guide" / "a.md").write_text(
        "# The A\n\n## Twice\n\n## Twice\n\n[back](../../README.md#top) [second](#twice-1)\n"
        "[split\nlink](a.md#nope) ![figure](missing.png)\n", encoding="utf-8")
    problems = broken_links(str(tmp_path))
    assert [p.split(": ", 1)[0] for p in problems] == [
        "README.md:6", "README.md:6", "docs/guide/a.md:8", "docs/guide/a.md:9"], problems
    assert "docs/missing.md: no such file" in problems[0]
    assert "#set-up" in problems[1]
    assert "#nope" in problems[2] and "missing.png: no such file" in problems[3]
