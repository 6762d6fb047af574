"""Convert OPUS downloads (and TMX translation memories) to the split TSV.

Why: `nmtfrag split` works on a plain `doc_id<TAB>src<TAB>tgt` file so that any domain
can use it; this module is the only OPUS-specific part (Tiedemann 2012, "Parallel Data,
Tools and Interfaces in OPUS"). It reads:

- the Moses download (`<CORPUS>.<l1>-<l2>.<l1>`, `.<l2>` and `.ids`, loose or inside the
  `.txt.zip` OPUS serves): the `.ids` file has one line per sentence pair,
  `src_doc<TAB>tgt_doc<TAB>src_sentence_ids<TAB>tgt_sentence_ids`; the document id is
  the source document path (or the target path, or both, or a regex group of it);
- the XCES sentence alignment (`<l1>-<l2>.xml.gz`, `<linkGrp fromDoc=… toDoc=…>` with
  `<link xtargets="s1 s2;t1">`) plus the per-document XML of each language (`<l1>.zip`,
  `<l2>.zip` or directories): for corpora whose Moses download has no `.ids`;
- TMX (also `.gz`): document ids come from a `<prop type="…">` of each `<tu>` named by
  `doc_prop`; OPUS's own TMX files carry no document ids and are refused with a pointer
  to the Moses download.

Text is written as found except that tabs and line breaks inside a segment become
spaces (counted). Every reader raises InputError naming file and line/element on
malformed input; `find_moses_download` raises MissingDownload naming exactly which files
to fetch and from where (this machine cannot download).
"""
from __future__ import annotations

import contextlib
import gzip
import os
import re
import shlex
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from ..errors import InputError
from ..fileio import atomic_writer



class MissingDownload(InputError):
    """The OPUS files a recipe needs are not in the download directory (exit 2)."""


@dataclass
class ConversionLog:
    pairs: int = 0
    documents: int = 0
    tabs_or_breaks_replaced: int = 0
    skipped: dict = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def to_json(self) -> dict[str, Any]:
        return {"pairs": self.pairs, "documents": self.documents,
                "tabs_or_breaks_replaced": self.tabs_or_breaks_replaced,
                "skipped": dict(sorted(self.skipped.items()))}


# --- file access: loose files, .gz, members of a .zip --------------------------------

@dataclass(frozen=True)
class FileRef:
    """A file on disk, or a member of a zip archive (`archive` set)."""

    path: str
    archive: str | None = None

    def __str__(self):
        return f"{self.archive}:{self.path}" if self.archive else self.path

    @contextlib.contextmanager
    def open_binary(self) -> Iterator[IO[bytes] | gzip.GzipFile]:
        if self.archive:
            with zipfile.ZipFile(self.archive) as z, z.open(self.path) as f:
                if self.path.endswith(".gz"):
                    with gzip.open(f) as g:
                        yield g
                else:
                    yield f
        elif self.path.endswith(".gz"):
            with gzip.open(self.path, "rb") as f:
                yield f
        else:
            with open(self.path, "rb") as f:
                yield f


def _lines(ref):
    """Yield (line_no, text) of a UTF-8 text file, without line endings."""
    with ref.open_binary() as f:
        for line_no, raw in enumerate(f, 1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"{ref} line {line_no}: invalid UTF-8 "
                                 f"(byte {exc.start + 1})") from None
            yield line_no, text.rstrip("\n").rstrip("\r")


def _clean(text, log):
    """Tabs and line breaks inside a segment would break the TSV: make them spaces."""
    if "\t" in text or "\n" in text or "\r" in text:
        log.tabs_or_breaks_replaced += 1
        text = re.sub(r"[\t\r\n]", " ", text)
    return text.strip()


def _doc_id(path_src, path_tgt, doc_key, doc_regex, where):
    doc = {"src": path_src, "tgt": path_tgt,
           "pair": f"{path_src}|{path_tgt}"}[doc_key]
    if doc_regex:
        m = re.search(doc_regex, doc)
        if not m:
            raise InputError(f"{where}: document {doc!r} does not match --doc-regex "
                             f"{doc_regex!r}")
        doc = m.group(1) if m.groups() else m.group(0)
    if not doc:
        raise InputError(f"{where}: empty document id")
    return doc


# --- Moses + ids ----------------------------------------------------------------------

def moses_ids_pairs(src: FileRef, tgt: FileRef, ids: FileRef, doc_key: str = "src",
                    doc_regex: str | None = None, log: ConversionLog | None = None
                    ) -> Iterator[tuple[str, str, str]]:
    """Yield (doc_id, src, tgt) from OPUS Moses files and their `.ids` file (FileRefs)."""
    log = log if log is not None else ConversionLog()
    seen = set()
    it_s, it_t, it_i = _lines(src), _lines(tgt), _lines(ids)
    line_no = 0
    while True:
        a, b, c = next(it_s, None), next(it_t, None), next(it_i, None)
        if a is None and b is None and c is None:
            break
        line_no += 1
        if a is None or b is None or c is None:
            short = [str(r) for r, x in ((src, a), (tgt, b), (ids, c)) if x is None]
            raise InputError(f"{', '.join(short)} ended at line {line_no - 1} while the "
                             f"other files go on: Moses files and .ids must be "
                             f"line-aligned")
        cols = c[1].split("\t")
        if len(cols) < 2:
            raise InputError(f"{ids} line {line_no}: expected 'src_doc<TAB>tgt_doc"
                             f"<TAB>src_ids<TAB>tgt_ids', found {len(cols)} field(s)")
        doc = _doc_id(cols[0], cols[1], doc_key, doc_regex, f"{ids} line {line_no}")
        if doc not in seen:
            seen.add(doc)
            log.documents += 1
        log.pairs += 1
        yield doc, _clean(a[1], log), _clean(b[1], log)


def find_moses_download(opus_dir: str, corpus: str, src_lang: str, tgt_lang: str,
                        url: str | None = None, release: str | None = None
                        ) -> tuple[FileRef, FileRef, FileRef]:
    """Locate `<corpus>.<pair>.{src,tgt,ids}` in `opus_dir`, loose or in a .zip there.

    Returns (src, tgt, ids) FileRefs; raises MissingDownload naming what to fetch.
    """
    pair = "-".join(sorted([src_lang, tgt_lang]))  # OPUS orders the pair alphabetically
    names = {"src": f"{corpus}.{pair}.{src_lang}", "tgt": f"{corpus}.{pair}.{tgt_lang}",
             "ids": f"{corpus}.{pair}.ids"}
    found = {}
    if os.path.isdir(opus_dir):
        for root, dirs, files in os.walk(opus_dir):
            dirs.sort()
            for f in sorted(files):
                for key, name in names.items():
                    if f == name and key not in found:
                        found[key] = FileRef(os.path.join(root, f))
            for f in sorted(files):
                if not f.endswith(".zip") or len(found) == len(names):
                    continue
                archive = os.path.join(root, f)
                try:
                    with zipfile.ZipFile(archive) as z:
                        members = z.namelist()
                except zipfile.BadZipFile:
                    raise InputError(f"{archive}: not a valid zip archive (incomplete "
                                     f"download?)") from None
                for key, name in names.items():
                    for m in members:
                        if os.path.basename(m) == name and key not in found:
                            found[key] = FileRef(m, archive=archive)
    missing = [names[k] for k in ("src", "tgt", "ids") if k not in found]
    if missing:
        what = f"OPUS {corpus}" + (f" {release}" if release else "") + f" {pair}"
        where = (f"{opus_dir} does not exist" if not os.path.isdir(opus_dir)
                 else f"not found in {opus_dir}")
        fetch = (f"fetch {url} (Moses format) into {opus_dir}, e.g. "
                 f"`wget -P {shlex.quote(opus_dir)} {url}`" if url else
                 f"fetch the Moses-format {pair} archive of {corpus} from "
                 f"https://opus.nlpl.eu/ into {opus_dir}")
        raise MissingDownload(f"{what}: {where}: missing {', '.join(missing)} (loose, "
                              f"or inside the OPUS .zip); {fetch}, then run again (no "
                              f"unpacking needed)")
    return found["src"], found["tgt"], found["ids"]


# --- XCES alignment + per-document XML ------------------------------------------------

class _DocStore:
    """Per-document sentence XML of one language: a directory or a zip archive."""

    def __init__(self, location):
        if not os.path.exists(location):
            raise InputError(f"{location}: no such file or directory")
        self.location = location
        self.is_zip = zipfile.is_zipfile(location)
        self.members = None
        if self.is_zip:
            with zipfile.ZipFile(location) as z:
                self.members = [m for m in z.namelist() if not m.endswith("/")]

    def find(self, doc_path: str) -> FileRef:
        """Resolve an alignment's document path (e.g. 'de/x.xml.gz') to a FileRef."""
        candidates = [doc_path, doc_path[:-3] if doc_path.endswith(".gz") else
                      doc_path + ".gz"]
        if self.is_zip:
            for cand in candidates:
                for m in self.members:
                    if m == cand or m.endswith("/" + cand):
                        return FileRef(m, archive=self.location)
        else:
            for cand in candidates:
                for base in (self.location, os.path.dirname(self.location)):
                    p = os.path.join(base, cand)
                    if os.path.exists(p):
                        return FileRef(p)
        raise InputError(f"document {doc_path} (named in the alignment) not found in "
                         f"{self.location}")


def _sentences(ref):
    """{sentence id: text} of an OPUS document (raw or tokenised: <w> tokens joined)."""
    out = {}
    try:
        with ref.open_binary() as f:
            for _, el in ET.iterparse(f, events=("end",)):
                if el.tag == "s":
                    words = [w.text or "" for w in el.iter("w")]
                    text = " ".join(words) if words else "".join(el.itertext())
                    out[el.get("id")] = " ".join(text.split())
                    el.clear()
    except ET.ParseError as exc:
        raise InputError(f"{ref}: malformed XML ({exc})") from None
    return out


def xces_pairs(align: str, src_docs: str, tgt_docs: str, doc_key: str = "src",
               doc_regex: str | None = None, log: ConversionLog | None = None
               ) -> Iterator[tuple[str, str, str]]:
    """Yield (doc_id, src, tgt) from an XCES alignment file and the document stores.

    Links with no sentence on one side are skipped and counted (`one_side_empty`);
    links with several sentences on a side join them with a space.
    """
    log = log if log is not None else ConversionLog()
    src_store, tgt_store = _DocStore(src_docs), _DocStore(tgt_docs)
    ref = FileRef(align)
    try:
        with ref.open_binary() as f:
            doc = None
            for event, el in ET.iterparse(f, events=("start", "end")):
                if el.tag == "linkGrp" and event == "start":
                    from_doc, to_doc = el.get("fromDoc"), el.get("toDoc")
                    if not from_doc or not to_doc:
                        raise InputError(f"{align}: <linkGrp> without fromDoc/toDoc")
                    doc = _doc_id(from_doc, to_doc, doc_key, doc_regex, str(align))
                    src_sent = _sentences(src_store.find(from_doc))
                    tgt_sent = _sentences(tgt_store.find(to_doc))
                    log.documents += 1
                elif el.tag == "link" and event == "end":
                    xt = el.get("xtargets")
                    if xt is None or ";" not in xt:
                        raise InputError(f"{align}: <link> without xtargets 'src;tgt' in "
                                         f"document {doc}")
                    s_ids, t_ids = (x.split() for x in xt.split(";", 1))
                    if not s_ids or not t_ids:
                        log.skip("one_side_empty")
                        continue
                    try:
                        s = " ".join(src_sent[i] for i in s_ids)
                        t = " ".join(tgt_sent[i] for i in t_ids)
                    except KeyError as exc:
                        raise InputError(f"{align}: sentence id {exc.args[0]} of document "
                                         f"{doc} not found in its XML") from None
                    log.pairs += 1
                    assert doc is not None  # src_sent is read with it, at its <linkGrp>
                    yield doc, _clean(s, log), _clean(t, log)
                elif el.tag == "linkGrp" and event == "end":
                    el.clear()
    except ET.ParseError as exc:
        raise InputError(f"{align}: malformed XML ({exc})") from None


# --- TMX --------------------------------------------------------------------------------

def tmx_pairs(tmx: str, src_lang: str, tgt_lang: str, doc_prop: str | None = None,
              log: ConversionLog | None = None) -> Iterator[tuple[str, str, str]]:
    """Yield (doc_id, src, tgt) from a TMX file; the document is <prop type=doc_prop>.

    Read by nmtfrag.data.tmx (the one TMX reader: language variants, inline markup, streaming).
    A <tu> without a segment in both languages is skipped and counted; a <tu> without
    the document property is refused (its document is unknown).
    """
    from .tmx import TmxLog, check_some_pairs, first_unit_props, read_tmx

    log = log if log is not None else ConversionLog()
    if doc_prop is None:
        found = ", ".join(first_unit_props(tmx)) or "none"
        raise InputError(
            f"{tmx}: TMX has no standard document id; pass --doc-prop NAME, "
            f"the <prop type=\"NAME\"> that names each unit's document "
            f"(props of the first <tu>: {found}). OPUS TMX files carry no "
            f"document ids: use the Moses download with its .ids file")
    tlog = TmxLog()
    for doc, src, tgt in read_tmx(tmx, src_lang, tgt_lang, doc_prop, tlog):
        log.pairs += 1
        assert doc is not None  # doc_prop is given: read_tmx refuses a unit without it
        yield doc, _clean(src, log), _clean(tgt, log)
    check_some_pairs(tmx, src_lang, tgt_lang, tlog)  # no empty TSV (raised mid-write)
    log.documents += tlog.documents
    for reason, n in tlog.skipped.items():
        log.skipped[reason] = log.skipped.get(reason, 0) + n


# --- writing ------------------------------------------------------------------------------

def write_tsv(pairs: Iterable[tuple[str, str, str]], out: str) -> int:
    """Write (doc_id, src, tgt) triples as the split TSV, atomically; return the count."""
    n = 0
    with atomic_writer(out) as f:
        for doc, src, tgt in pairs:
            f.write(f"{_clean(doc, ConversionLog())}\t{src}\t{tgt}\n")
            n += 1
    return n


# --- recipes ---------------------------------------------------------------------------

RECIPE_KEYS = {"CORPUS", "RELEASE", "SRC_LANG", "TGT_LANG", "FORMAT", "URL", "HOMEPAGE",
               "DOC_KEY", "DOC_REGEX", "TRAIN", "VALID", "TEST", "SEED", "OVERFLOW",
               "DEDUP", "LICENCE", "CITATION"}


def read_recipe(path: str) -> dict[str, str]:
    """Parse a recipe: `KEY="value"` lines (a subset of shell, so bash can source it)."""
    if not os.path.exists(path):
        raise InputError(f"{path}: no such recipe")
    recipe = {}
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, value = line.partition("=")
            if not sep or key not in RECIPE_KEYS:
                raise InputError(f"{path} line {line_no}: expected KEY=\"value\" with KEY "
                                 f"one of {', '.join(sorted(RECIPE_KEYS))}")
            try:
                words = shlex.split(value, comments=True)
            except ValueError as exc:
                raise InputError(f"{path} line {line_no}: {exc}") from None
            recipe[key] = " ".join(words)
    for key in ("CORPUS", "SRC_LANG", "TGT_LANG"):
        if key not in recipe:
            raise InputError(f"{path}: recipe lacks {key}")
    return recipe


def convert_recipe(recipe: dict[str, str], opus_dir: str, out: str
                   ) -> tuple[ConversionLog, dict[str, str]]:
    """Convert the OPUS download a recipe describes into the split TSV `out`."""
    fmt = recipe.get("FORMAT", "moses")
    if fmt != "moses":
        raise InputError(f"recipe FORMAT {fmt!r} is not supported (only 'moses')")
    src, tgt, ids = find_moses_download(opus_dir, recipe["CORPUS"], recipe["SRC_LANG"],
                                        recipe["TGT_LANG"], url=recipe.get("URL"),
                                        release=recipe.get("RELEASE"))
    log = ConversionLog()
    write_tsv(moses_ids_pairs(src, tgt, ids, doc_key=recipe.get("DOC_KEY", "src"),
                              doc_regex=recipe.get("DOC_REGEX") or None, log=log), out)
    return log, {"src": str(src), "tgt": str(tgt), "ids": str(ids)}


__all__ = ["ConversionLog", "FileRef", "MissingDownload", "convert_recipe",
           "find_moses_download", "moses_ids_pairs", "read_recipe", "tmx_pairs",
           "write_tsv", "xces_pairs"]
