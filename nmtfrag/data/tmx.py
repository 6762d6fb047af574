"""Read translation memories (TMX 1.4b, `.tmx` or `.tmx.gz`) as sentence pairs, streaming.

Why: data owners keep their parallel text as TMX exported from CAT tools; `extract`,
`vocab`, `finetune --train` and `split` take one directly (`--tmx FILE`) instead of a
manual conversion into two line-aligned files. The one TMX reader of the project:
`nmtfrag opus2tsv --tmx` uses it too.

Streaming: `xml.etree.ElementTree.iterparse`; each <tu> is read when it ends, then
cleared and removed from <body>, so memory stays flat however many units the file holds
(benchmarks/tmx_read.py measures peak RSS at 100k and 1M units).

Which <tuv> is which language: its `xml:lang` (TMX 1.4), else its `lang` attribute
(TMX 1.1), compared by primary language subtag, case-insensitively: `de`, `de-DE`,
`DE-de`, `de_AT` are all German for `--src-lang de`. The first matching <tuv> of a
<tu> is taken; a <tu> without a segment in both languages is skipped and counted.

Inline markup (TMX 1.4b, section 3.7 "Inline elements"):
- <bpt>, <ept>, <it>, <ph> (and the deprecated <ut>) hold *native code* (the RTF, HTML,
  … formatting of the source document), not text: dropped with their content;
- <sub> appears only inside those codes and delimits a *sub-flow* (a footnote, the alt
  text of an image): a different text, not part of the sentence; dropped with the code
  that holds it;
- <hi> (highlight: a term, a proper name) holds text of the sentence: its text is kept,
  and its own inline codes are dropped by the same rules.
Whitespace runs (line breaks and tabs included) become one space and the segment is
stripped, so every pair is one line.

Document ids (for `--privacy-unit document`, `split`): `doc_prop` names a
`<prop type="NAME">` of each <tu>; if no such prop is there, a <tu> attribute of that
name (e.g. `creationid`, `o-tmf`, or a tool's own). A unit without it is refused: its
document is unknown.

A malformed file is one InputError naming its line and column (the parser's position).
"""
from __future__ import annotations

import contextlib
import gzip
import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from ..errors import InputError

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
NATIVE_CODE = {"bpt", "ept", "it", "ph", "ut"}  # content is formatting code, not text
TMX_SUFFIXES = (".tmx", ".tmx.gz")
_SPACE = re.compile(r"\s+")


@dataclass
class TmxLog:
    """What a read kept and skipped (counts only: no text)."""
    units: int = 0
    pairs: int = 0
    documents: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def to_json(self) -> dict[str, Any]:
        return {"units": self.units, "pairs": self.pairs, "documents": self.documents,
                "skipped": dict(sorted(self.skipped.items()))}


def is_tmx(path: object) -> bool:
    """A path named like a translation memory."""
    return str(path).lower().endswith(TMX_SUFFIXES)


def primary_subtag(code: Optional[str]) -> str:
    """`de` of `de`, `DE-de`, `de_AT`; '' for none."""
    return re.split(r"[-_]", (code or "").strip().lower(), maxsplit=1)[0]


def seg_text(el: ET.Element) -> str:
    """Text of a <seg> (or <hi>) under TMX 1.4b's inline rules (see module doc)."""
    parts = [el.text or ""]
    for child in el:
        if child.tag == "hi":
            parts.append(seg_text(child))
        elif child.tag not in NATIVE_CODE and child.tag != "sub":
            parts.append(seg_text(child))  # unknown markup: keep its text
        parts.append(child.tail or "")
    return _SPACE.sub(" ", "".join(parts)).strip()


@contextlib.contextmanager
def _open(path):
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such file")
    if str(path).lower().endswith(".gz"):
        with gzip.open(path, "rb") as f:
            yield f
    else:
        with open(path, "rb") as f:
            yield f


def _unit_doc(tu, doc_prop, n, path):
    for p in tu.iter("prop"):
        if p.get("type") == doc_prop and (p.text or "").strip():
            return p.text.strip()
    if tu.get(doc_prop):
        return tu.get(doc_prop)
    found = sorted({p.get("type") for p in tu.iter("prop") if p.get("type")})
    raise InputError(f"{path}: <tu> number {n} has no <prop type=\"{doc_prop}\"> nor a "
                     f"{doc_prop} attribute: its document is unknown (its props: "
                     f"{', '.join(found) or 'none'})")


def first_unit_props(path: str) -> list[str]:
    """The <prop type>s of the first <tu> (to suggest a --doc-prop)."""
    try:
        with _open(path) as f:
            for _, el in ET.iterparse(f, events=("end",)):
                if el.tag == "tu":
                    return sorted({p.get("type") for p in el.iter("prop") if p.get("type")})
    except ET.ParseError:
        pass  # read_tmx reports it with its position
    return []


def read_tmx(path: str, src_lang: str, tgt_lang: str, doc_prop: Optional[str] = None,
             log: Optional[TmxLog] = None) -> Iterator[tuple[Optional[str], str, str]]:
    """Yield (doc_id or None, src, tgt) for each <tu> with both languages, in file order.

    Memory stays flat: every finished <tu> is removed from the tree."""
    log = log if log is not None else TmxLog()
    src_key, tgt_key = primary_subtag(src_lang), primary_subtag(tgt_lang)
    if not src_key or not tgt_key or src_key == tgt_key:
        raise InputError(f"--src-lang {src_lang} --tgt-lang {tgt_lang}: two different "
                         f"languages are needed to read a TMX")
    seen = set()
    parent = None  # the element holding the <tu>s (<body>)
    try:
        with _open(path) as f:
            stack = []
            for event, el in ET.iterparse(f, events=("start", "end")):
                if event == "start":
                    stack.append(el)
                    continue
                stack.pop()
                if el.tag != "tu":
                    continue
                log.units += 1
                segs = {}
                for tuv in el.iter("tuv"):
                    key = primary_subtag(tuv.get(XML_LANG) or tuv.get("lang"))
                    seg = tuv.find("seg")
                    if seg is not None and key in (src_key, tgt_key) and key not in segs:
                        segs[key] = seg_text(seg)
                doc = None
                if doc_prop and src_key in segs and tgt_key in segs:
                    doc = _unit_doc(el, doc_prop, log.units, path)
                parent = stack[-1] if stack else None
                el.clear()
                if parent is not None:
                    parent.remove(el)  # cleared is not enough: <body> would keep them
                if src_key not in segs or tgt_key not in segs:
                    log.skip("tu_without_both_languages")
                    continue
                if doc is not None and doc not in seen:
                    seen.add(doc)
                    log.documents += 1
                log.pairs += 1
                yield doc, segs[src_key], segs[tgt_key]
    except ET.ParseError as exc:
        line, col = exc.position
        msg = str(exc).split(":")[0]
        raise InputError(f"{path} line {line} column {col + 1}: malformed XML, not a "
                         f"TMX ({msg})") from None
    except (OSError, EOFError) as exc:  # e.g. a truncated or non-gzip .gz
        raise InputError(f"{path}: cannot read ({exc})") from None


def tmx_to_files(path: str, src_lang: str, tgt_lang: str, prefix: str,
                 doc_prop: Optional[str] = None) -> tuple[dict[str, str], TmxLog]:
    """Write PREFIX.SRC, PREFIX.TGT (and PREFIX.docs with `doc_prop`) from a TMX;
    return (paths dict, TmxLog). An empty result is an InputError."""
    log = TmxLog()
    paths = {"src": f"{prefix}.{src_lang}", "tgt": f"{prefix}.{tgt_lang}"}
    if doc_prop:
        paths["documents"] = f"{prefix}.docs"
    files = {k: open(p, "w", encoding="utf-8", newline="\n") for k, p in paths.items()}
    try:
        for doc, src, tgt in read_tmx(path, src_lang, tgt_lang, doc_prop, log):
            files["src"].write(src + "\n")
            files["tgt"].write(tgt + "\n")
            if doc_prop:
                assert doc is not None  # read_tmx names each unit's document with doc_prop
                files["documents"].write(_SPACE.sub(" ", doc) + "\n")
    finally:
        for f in files.values():
            f.close()
    check_some_pairs(path, src_lang, tgt_lang, log)
    return paths, log


def check_some_pairs(path: str, src_lang: str, tgt_lang: str, log: TmxLog) -> None:
    """Refuse a TMX read that gave no pair (InputError naming the file and languages):
    an empty conversion is never a result (`extract`, `opus2tsv --tmx`, `split --tmx`)."""
    if not log.pairs:
        raise InputError(f"{path}: no <tu> with a segment in both {src_lang} and "
                         f"{tgt_lang} ({log.units} units read)")
