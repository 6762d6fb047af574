"""Reading a line-aligned parallel corpus, with every defect either refused or counted.

Decisions (documented in docs/guide/fragmentation.md, "Corpus input"):
- one file as both sides (also through a link), missing or empty file, different line
  counts, invalid UTF-8, a NUL or other control
  character (C0 except tab and CR, or DEL): refused (InputError,
  exit 2, naming the file and line), before any work is done: each means the files are
  not what the user thinks, and silently dropping data would shift what is aligned;
- a line empty (or blank) on one side only, or on both: skipped, counted per reason
  with its line numbers (the pair carries no translation);
- CR/LF endings and a UTF-8 byte-order mark: normalised away and counted.
Lines are split on `\\n` only (never on the other characters `str.splitlines` treats as
line breaks), so line numbers always match `wc -l` / `sed -n Np`.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..errors import InputError

MAX_LISTED_LINES = 1000  # line numbers kept per skip reason in a manifest
# Control bytes no text line holds: the tokeniser strips NUL silently (a pair then
# counts differently than the user sees it), and with --pretokenized they would reach
# the shared release. Tab and CR (a CRLF ending, normalised) are allowed.
CONTROL_BYTES = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_CONTROL_NAMES = {0: "NUL", 0x1b: "ESC", 0x7f: "DEL", 0x0c: "form feed",
                  0x0b: "vertical tab"}


@dataclass
class SkipLog:
    """Counts of skipped or normalised lines per reason (with their 1-based numbers)."""

    counts: dict[str, int] = field(default_factory=dict)
    lines: dict[str, list[int]] = field(default_factory=dict)

    def add(self, reason: str, line_no: int) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + 1
        listed = self.lines.setdefault(reason, [])
        if len(listed) < MAX_LISTED_LINES:
            listed.append(line_no)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_json(self) -> dict[str, dict]:
        return {reason: {"count": n, "lines": self.lines[reason],
                         "lines_truncated": n > len(self.lines[reason])}
                for reason, n in sorted(self.counts.items())}


def _raw_lines(path):
    """Yield (line_no, bytes without the trailing newline) splitting on b'\\n' only."""
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, 1):
            yield line_no, raw[:-1] if raw.endswith(b"\n") else raw


def check_input_file(path: str) -> None:
    """Refuse a path that is missing, a directory, or an empty file (exit 2)."""
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file")
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory, expected a text file")
    if os.path.getsize(path) == 0:
        raise InputError(f"{path}: file is empty")


def scan_text_file(path: str) -> int:
    """Check one file is readable UTF-8 text; return its number of lines.

    Raises InputError naming the first line that is not valid UTF-8 or holds a control
    character.
    """
    check_input_file(path)
    n = 0
    for n, raw in _raw_lines(path):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{path} line {n}: invalid UTF-8 (byte {exc.start + 1}); "
                             f"convert the file to UTF-8 first") from None
        bad = CONTROL_BYTES.search(raw)
        if bad:
            code = raw[bad.start()]
            name = _CONTROL_NAMES.get(code, "control character")
            raise InputError(f"{path} line {n}: {name} (byte 0x{code:02x}) at byte "
                             f"{bad.start() + 1}; text lines may not hold control "
                             f"characters (remove them first, e.g. with tr -d)")
    return n


def check_distinct_sides(src_path: str, tgt_path: str, what: str | None = None,
                         sides: str = "the source and the target side") -> None:
    """Refuse one file given as both sides of a parallel pair (InputError naming `what`,
    the options that gave them, and the file). Why: it was accepted, and made a release
    with German on both sides. A link to the same file counts (os.path.samefile); a
    missing file is left to the caller's own check. Reads nothing: call it first."""
    try:
        same = os.path.samefile(src_path, tgt_path)
    except OSError:
        return
    if not same:
        return
    files = (src_path if os.path.abspath(src_path) == os.path.abspath(tgt_path)
             else f"{src_path} and {tgt_path}")
    where = f"{what}: " if what else ""
    raise InputError(f"{where}the same file ({files}) is both {sides}; they must be two "
                     f"files, one per language")


# Frequent function words per language: a cheap, dictionary-free signal of a text's
# language (WMT19's dictionaries are joined and cannot tell). Only the words of one
# language that are not in the other's list count when two are compared.
FUNCTION_WORDS = {
    "de": "der die das und ist nicht den von zu mit sich des auf für ein eine dem im "
          "auch es wird werden sind ich wir oder bei nach wenn nur",
    "en": "the of and to is in that for it with as was on are be by this not you have "
          "from which or an at should if only",
    "fr": "le la les de et des du un une est que qui dans pour pas sur au ne se il ce "
          "avec ou sont",
    "es": "el la los las de y que en del se por con un una es para no al lo su como "
          "más",
    "it": "il la di e che è per un una non del della sono le si con da gli nel",
    "nl": "de het een en van is dat op te niet zijn met voor die er ook wordt aan",
}
LANGUAGE_SAMPLE_BYTES = 1 << 18   # the first 256 KiB of each file: cheap on any size
LANGUAGE_MIN_HITS = 20            # function words of the other language a side must show
LANGUAGE_MIN_RATIO = 4            # ... at least this many times its own language's


def language_evidence(path: str, lang_a: str, lang_b: str) -> tuple[int, int] | None:
    """(words of lang_a, words of lang_b) among the function words found in the start
    of `path` (each language's words not in the other's list); None when either
    language has no list here (then nothing is judged)."""
    a_words, b_words = FUNCTION_WORDS.get(lang_a), FUNCTION_WORDS.get(lang_b)
    if a_words is None or b_words is None:
        return None
    a, b = set(a_words.split()), set(b_words.split())
    a, b = a - b, b - a
    try:
        with open(path, "rb") as f:
            text = f.read(LANGUAGE_SAMPLE_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None  # the caller's own checks name an unreadable file
    hits_a = hits_b = 0
    for word in re.findall(r"[^\W\d_]+", text.lower()):
        if word in a:
            hits_a += 1
        elif word in b:
            hits_b += 1
    return hits_a, hits_b


def _looks_like_other(hits: tuple[int, int] | None) -> bool:
    """Strong evidence that a side meant for the first language is in the second."""
    return (hits is not None and hits[1] >= LANGUAGE_MIN_HITS
            and hits[1] >= LANGUAGE_MIN_RATIO * max(hits[0], 1))


def check_not_swapped(src_path: str, tgt_path: str, src_lang: str, tgt_lang: str,
                      what: str | None = None) -> None:
    """Refuse a pair whose two files look swapped against the languages they are for
    (InputError naming `what`, the files and the evidence). Why: `finetune --train c.en
    c.de` with a de→en model was accepted and trained the model backwards. Refused only
    when both sides say so strongly: each shows at least LANGUAGE_MIN_HITS frequent
    function words of the other language, LANGUAGE_MIN_RATIO times its own language's;
    text without such words (or languages without a list) is never refused."""
    src = language_evidence(src_path, src_lang, tgt_lang)
    tgt = language_evidence(tgt_path, tgt_lang, src_lang)
    if not (_looks_like_other(src) and _looks_like_other(tgt)):
        return
    assert src is not None and tgt is not None
    where = f"{what}: " if what else ""
    raise InputError(
        f"{where}the files look swapped: {src_path} (for {src_lang}) reads as {tgt_lang} "
        f"and {tgt_path} (for {tgt_lang}) as {src_lang} ({src[1]} vs {src[0]} and "
        f"{tgt[1]} vs {tgt[0]} frequent {tgt_lang}/{src_lang} function words at their "
        f"start); give the {src_lang} file first, or set --src-lang/--tgt-lang to the "
        f"model's languages")


def validate_parallel(src_path: str, tgt_path: str, what: str | None = None) -> int:
    """Refuse a pair of files that cannot be a line-aligned corpus; return line count.
    `what` names the options that gave them (e.g. "--src/--tgt") in a refusal."""
    check_distinct_sides(src_path, tgt_path, what)
    n_src = scan_text_file(src_path)
    n_tgt = scan_text_file(tgt_path)
    if n_src != n_tgt:
        raise InputError(f"{src_path} has {n_src} lines but {tgt_path} has {n_tgt}: "
                         f"parallel files must be line-aligned")
    return n_src


def _clean(raw, line_no, normalised, side):
    text = raw.decode("utf-8")
    if text.endswith("\r"):
        text = text[:-1]
        normalised.add(f"crlf_{side}", line_no)
    if line_no == 1 and text.startswith("\ufeff"):
        text = text[1:]
        normalised.add(f"bom_{side}", line_no)
    return text


def read_text_lines(path: str) -> list[str]:
    """The lines of one text file (checked first by scan_text_file), CRLF endings and a
    leading UTF-8 byte-order mark normalised away as read_parallel does. Why: evaluate
    kept a reference's BOM, so its first line never matched (99.56 BLEU for a perfect
    hypothesis) while extract read the same file without it."""
    scan_text_file(path)
    normalised = SkipLog()
    return [_clean(raw, line_no, normalised, "text") for line_no, raw in _raw_lines(path)]


def read_parallel(src_path: str, tgt_path: str, skips: SkipLog,
                  normalised: SkipLog | None = None) -> Iterator[tuple[int, str, str]]:
    """Yield (line_no, src, tgt) for every usable pair; record the others in `skips`.

    Call `validate_parallel` first: this generator assumes equal line counts and UTF-8.
    """
    normalised = normalised if normalised is not None else SkipLog()
    for (line_no, raw_src), (_, raw_tgt) in zip(_raw_lines(src_path), _raw_lines(tgt_path)):
        src = _clean(raw_src, line_no, normalised, "src")
        tgt = _clean(raw_tgt, line_no, normalised, "tgt")
        empty_src, empty_tgt = not src.strip(), not tgt.strip()
        if empty_src and empty_tgt:
            skips.add("empty_both_sides", line_no)
        elif empty_src or empty_tgt:
            skips.add("empty_one_side", line_no)
        else:
            yield line_no, src, tgt


def count_lines(path: str) -> int | None:
    """Lines in `path` (a last line without its newline counts), None if it is missing."""
    try:
        with open(path, "rb") as f:
            n = last = 0
            for block in iter(lambda: f.read(1 << 20), b""):
                n += block.count(b"\n")
                last = block[-1]
    except FileNotFoundError:
        return None
    return n + (last not in (0, ord("\n")))
