"""Every user mistake: exit 2, one `error:` line naming the option or file, no
traceback, no OUT left behind, inputs untouched (issue 21).

A table of bad invocations across every command, run as a user runs them
(`python -m nmtfrag ...` in a subprocess). Almost all fail at argument or input
validation, before any model loads, so the whole table takes seconds.

Print the table for a report (command, input, exit, message):
    PYTHONPATH=. python3 tests/cli/test_cli_errors.py --table
"""
import os
import resource
import signal
import subprocess
import sys
from dataclasses import dataclass

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from test_output_guard import tree as snapshot  # noqa: E402 (every file's SHA-256)
from tinymodel import make_corpus, write_parallel  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class Case:
    """One bad invocation. `argv` uses {d} for the workspace; `expect` must occur in
    the error line (the option or file it names); `out` is the output path that must
    not exist afterwards (None: the command writes no OUT); `fsize` caps every file the
    command writes at that many bytes (RLIMIT_FSIZE, SIGXFSZ ignored: a write fails with
    EFBIG as on a full disk) and the error line must end in ": File too large"."""
    id: str
    argv: str
    expect: str
    out: str = "{d}/OUT"
    fsize: int | None = None


# Shorthands for the valid parts of a command line.
PAIR = "--src {d}/good.de --tgt {d}/good.en"
FT = "finetune --model {d}/fakemodel --train {d}/good.de {d}/good.en " \
     "--valid-src {d}/good.de --valid-tgt {d}/good.en --out {d}/OUT --max-updates 1"
FTDP = FT + " --dp --sample-rate 0.5 --noise-multiplier 1"
EV = "evaluate --src {d}/good.de --ref {d}/good.en --out {d}/OUT"
CAN = "audit canaries insert " + PAIR + " --out {d}/OUT"
PLAN = "privacy --noise-multiplier 1 --sample-rate 0.01 --steps 10 --n-examples 1000"

CASES = [
    # extract
    Case("extract-eps-huge", f"extract {PAIR} --out {{d}}/OUT --dp --epsilon 1e308 "
         "--delta 1e-5", "--epsilon"),
    Case("extract-eps-nan", f"extract {PAIR} --out {{d}}/OUT --dp --epsilon nan "
         "--delta 1e-5", "--epsilon"),
    Case("extract-eps-negative", f"extract {PAIR} --out {{d}}/OUT --dp --epsilon -3 "
         "--delta 1e-5", "--epsilon"),
    Case("extract-dp-no-delta", f"extract {PAIR} --out {{d}}/OUT --dp --epsilon 1",
         "--delta"),
    Case("extract-delta-above-1", f"extract {PAIR} --out {{d}}/OUT --dp --epsilon 1 "
         "--delta 1.5", "--delta"),
    Case("extract-delta-above-1/n", f"extract {PAIR} --out {{d}}/OUT --dp --epsilon 1 "
         "--delta 0.4", "--delta"),
    Case("extract-sample-rate-0", f"extract {PAIR} --out {{d}}/OUT --sample-rate 0",
         "--sample-rate"),
    Case("extract-max-len-0", f"extract {PAIR} --out {{d}}/OUT --max-len 0", "--max-len"),
    Case("extract-seed-negative", f"extract {PAIR} --out {{d}}/OUT --seed -1", "--seed"),
    Case("extract-unit-cap-word", f"extract {PAIR} --out {{d}}/OUT --unit-cap many",
         "--unit-cap"),
    # size options beyond what a run can meet (nmtfrag.limits): refused while parsing
    Case("extract-max-len-huge", f"extract {PAIR} --out {{d}}/OUT --max-len 1000000000",
         "--max-len must be at most 100"),
    Case("extract-min-len-huge", f"extract {PAIR} --out {{d}}/OUT --min-len 101",
         "--min-len must be at most 100"),
    Case("extract-unit-cap-huge", f"extract {PAIR} --out {{d}}/OUT --dp --epsilon 1 "
         "--delta 1e-5 --unit-cap 1000000000", "--unit-cap must be at most 100,000"),
    Case("extract-nul-byte", "extract --src {d}/nul.de --tgt {d}/good.en --out {d}/OUT",
         "nul.de line 2"),
    Case("extract-escape-byte", "extract --src {d}/good.de --tgt {d}/esc.en --out "
         "{d}/OUT", "esc.en line 3"),
    Case("extract-bad-utf8", "extract --src {d}/latin1.de --tgt {d}/good.en --out "
         "{d}/OUT", "latin1.de line 1"),
    Case("extract-line-counts", "extract --src {d}/good.de --tgt {d}/short.en --out "
         "{d}/OUT", "short.en"),
    Case("extract-missing-src", "extract --src {d}/missing.de --tgt {d}/good.en --out "
         "{d}/OUT", "missing.de"),
    Case("extract-empty-src", "extract --src {d}/empty.de --tgt {d}/good.en --out "
         "{d}/OUT", "empty.de"),
    Case("extract-out-is-file", f"extract {PAIR} --out {{d}}/afile", "afile", out=None),
    # align-model
    Case("align-model-lines-0", "align-model --public {d}/good --out {d}/OUT --lines 0",
         "--lines"),
    Case("align-model-missing-text", "align-model --public {d}/missing --out {d}/OUT",
         "missing"),
    # vocab
    Case("vocab-merges-negative", f"vocab --dp {PAIR} --sigma 1 --delta 1e-3 --merges -3 "
         "--out {d}/OUT", "--merges"),
    Case("vocab-sigma-0", f"vocab --dp {PAIR} --sigma 0 --delta 1e-3 --out {{d}}/OUT",
         "--sigma"),
    Case("vocab-sigma-inf", f"vocab --dp {PAIR} --sigma inf --delta 1e-3 --out {{d}}/OUT",
         "--sigma"),
    Case("vocab-no-delta", f"vocab --dp {PAIR} --sigma 1 --out {{d}}/OUT", "--delta"),
    Case("vocab-nul-byte", "vocab --dp --src {d}/nul.de --tgt {d}/good.en --sigma 1 "
         "--delta 1e-3 --out {d}/OUT", "nul.de line 2"),
    # finetune
    Case("finetune-lr-nan", FT + " --lr nan", "--lr"),
    Case("finetune-dropout-2", FT + " --dropout 2", "--dropout"),
    Case("finetune-label-smoothing-neg", FT + " --label-smoothing -0.1",
         "--label-smoothing"),
    Case("finetune-max-updates-0", FT + " --max-updates 0", "--max-updates"),
    Case("finetune-patience-below-1", FT + " --patience -2", "--patience"),
    Case("finetune-model-files-missing", FT, "dict.de.txt"),
    # finetune --dp
    Case("finetune-dp-delta-0", FTDP + " --delta 0", "--delta"),
    Case("finetune-dp-noise-negative", FTDP + " --delta 1e-5 --noise-multiplier -1",
         "--noise-multiplier"),
    Case("finetune-dp-sample-rate-1.5", FTDP + " --delta 1e-5 --sample-rate 1.5",
         "--sample-rate"),
    Case("finetune-dp-physical-batch-0", FTDP + " --delta 1e-5 --physical-batch 0",
         "--physical-batch"),
    Case("finetune-dp-target-eps-inf", FT + " --dp --sample-rate 0.5 --delta 1e-5 "
         "--target-epsilon inf", "--target-epsilon"),
    # evaluate
    Case("evaluate-beam-0", EV + " --hyp {d}/good.en --beam 0", "--beam"),
    Case("evaluate-first-negative", EV + " --hyp {d}/good.en --first -3", "--first"),
    Case("evaluate-bootstrap-0", EV + " --hyp {d}/good.en --bootstrap-samples 0",
         "--bootstrap-samples"),
    Case("evaluate-bootstrap-huge", EV + " --hyp {d}/good.en --bootstrap-samples "
         "1000000000", "--bootstrap-samples must be at most 10,000"),
    Case("evaluate-beam-huge", EV + " --model {d}/fakemodel --beam 1000000000",
         "--beam must be at most 1,000"),
    Case("evaluate-hyp-nul", EV + " --hyp {d}/nul.de", "nul.de line 2"),
    Case("evaluate-hyp-short", EV + " --hyp {d}/short.en", "short.en"),
    Case("evaluate-model-missing", EV + " --model {d}/nomodel", "--model"),
    Case("evaluate-model-files-missing", EV + " --model {d}/fakemodel", "dict.de.txt"),
    # translate
    Case("translate-beam-0", "translate --model {d}/fakemodel --beam 0", "--beam",
         out=None),
    Case("translate-beam-huge", "translate --model {d}/fakemodel --beam 20000",
         "--beam must be at most 1,000", out=None),
    Case("translate-input-nul", "translate --model {d}/fakemodel --input {d}/nul.de",
         "nul.de line 2", out=None),
    Case("translate-max-len-a-nan", "translate --model {d}/fakemodel --max-len-a nan",
         "--max-len-a", out=None),
    # length-penalty
    Case("lenpen-candidates-text", "length-penalty --model {d}/fakemodel --src {d}/good.de "
         "--ref {d}/good.en --out {d}/OUT --candidates 1,x", "--candidates"),
    Case("lenpen-candidates-0", "length-penalty --model {d}/fakemodel --src {d}/good.de "
         "--ref {d}/good.en --out {d}/OUT --candidates 0", "--candidates"),
    Case("lenpen-from-nothing", EV + " --model {d}/fakemodel --lenpen-from {d}",
         "--lenpen-from"),
    # privacy
    Case("privacy-no-such-dir", "privacy {d}/nonexistent", "no such directory", out=None),
    Case("privacy-file-not-dir", "privacy {d}/good.de", "not a directory", out=None),
    Case("privacy-delta-2", PLAN + " --delta 2", "--delta", out=None),
    Case("privacy-n-examples-0", "privacy --noise-multiplier 1 --sample-rate 0.01 "
         "--steps 10 --delta 1e-5 --n-examples 0", "--n-examples", out=None),
    Case("privacy-steps-negative", "privacy --noise-multiplier 1 --sample-rate 0.01 "
         "--steps -5 --delta 1e-5 --n-examples 1000", "--steps", out=None),
    # split
    Case("split-two-fields", "split --docs {d}/bad.tsv --out {d}/OUT --train all "
         "--valid 1 --test 1", "bad.tsv"),
    Case("split-valid-negative", "split --docs {d}/good.tsv --out {d}/OUT --valid -1",
         "--valid"),
    Case("split-seed-word", "split --docs {d}/good.tsv --out {d}/OUT --seed x", "--seed"),
    # stats
    Case("stats-nul-with-out", "stats --src {d}/nul.de --tgt {d}/good.en --out {d}/OUT",
         "nul.de line 2"),
    Case("stats-tgt-missing", "stats --src {d}/good.de", "--tgt", out=None),
    # study (its config's own errors: tests/study/test_study_config.py)
    Case("study-config-missing", "study run {d}/nostudy.toml --out {d}/OUT", "nostudy.toml"),
    Case("study-status-no-config", "study status --out {d}/OUT", "CONFIG", out=None),
    # opus2tsv
    Case("opus2tsv-no-input-form", "opus2tsv --out {d}/OUT.tsv", "--recipe",
         out="{d}/OUT.tsv"),
    Case("opus2tsv-missing-tmx", "opus2tsv --tmx {d}/missing.tmx --doc-prop d --out "
         "{d}/OUT.tsv", "missing.tmx", out="{d}/OUT.tsv"),
    Case("opus2tsv-out-dir-missing", "opus2tsv --tmx {d}/missing.tmx --out "
         "{d}/nodir/OUT.tsv", "nodir", out="{d}/nodir"),
    # audit canaries / reconstruct / exposure / membership / compare
    Case("canaries-count-0", CAN + " --count 0", "--count"),
    Case("canaries-repeats-words", CAN + " --repeats a,b", "--repeats"),
    Case("canaries-count-huge", CAN + " --count 1000000000", "--count must be at most"),
    Case("canaries-unseen-huge", CAN + " --unseen 1000000000", "--unseen must be at most"),
    Case("canaries-more-than-record-numbers", CAN + " --count 50000 --repeats 1,10",
         "150,000 canaries: at most 90,000"),  # drawing their numbers looped for ever
    Case("canaries-repeats-huge", CAN + " --repeats 1,1000000000",
         "--repeats 1,1000000000 = 20,000,000,020 inserted lines"),
    Case("canaries-nul-byte", "audit canaries insert --src {d}/nul.de --tgt {d}/good.en "
         "--out {d}/OUT", "nul.de line 2"),
    Case("reconstruct-max-len-0", "audit reconstruct --release {d}/norelease " + PAIR +
         " --out {d}/OUT --max-len 0", "--max-len"),
    Case("reconstruct-max-len-huge", "audit reconstruct --release {d}/norelease " + PAIR +
         " --out {d}/OUT --max-len 1000000000", "--max-len must be at most 100"),
    Case("reconstruct-min-overlap-neg", "audit reconstruct --release {d}/norelease " +
         PAIR + " --out {d}/OUT --min-overlap -1", "--min-overlap"),
    Case("exposure-model-missing", "audit exposure --model {d}/nomodel --canaries "
         "{d}/none.json --out {d}/OUT", "--model"),
    Case("exposure-beam-0", "audit exposure --model {d}/fakemodel --canaries "
         "{d}/none.json --out {d}/OUT --beam 0", "--beam"),
    Case("exposure-beam-huge", "audit exposure --model {d}/fakemodel --canaries "
         "{d}/none.json --out {d}/OUT --beam 1000000000", "--beam must be at most 1,000"),
    Case("membership-max-pairs-0", "audit membership --model {d}/fakemodel --members "
         "{d}/good --non-members {d}/good --out {d}/OUT --max-pairs 0", "--max-pairs"),
    Case("membership-model-missing", "audit membership --model {d}/nomodel --members "
         "{d}/good --non-members {d}/good --out {d}/OUT", "--model"),
    Case("compare-epsilon-nan", "audit compare --runs {d}/runs-nan.yaml --out {d}/OUT",
         "epsilon"),
    Case("compare-epsilon-negative", "audit compare --runs {d}/runs-neg.yaml --out "
         "{d}/OUT", "epsilon"),
    Case("compare-runs-missing", "audit compare --runs {d}/missing.yaml --out {d}/OUT",
         "missing.yaml"),
    # one file as both sides of a pair (also through a link), --fp16 without CUDA
    # (issue 31, item 4): refused before any work
    Case("extract-same-file", "extract --src {d}/good.de --tgt {d}/good.de --out {d}/OUT",
         "--src/--tgt: the same file ({d}/good.de) is both the source and the target"),
    Case("extract-same-file-by-link", "extract --src {d}/good.de --tgt {d}/link.en --out "
         "{d}/OUT", "--src/--tgt: the same file ({d}/good.de and {d}/link.en)"),
    Case("align-model-same-file", "align-model --public {d}/good --out {d}/OUT "
         "--src-lang de --tgt-lang de", "--public {d}/good: the same file"),
    Case("vocab-same-file", "vocab --dp --src {d}/good.de --tgt {d}/link.en --sigma 1 "
         "--delta 1e-3 --out {d}/OUT", "--src/--tgt: the same file"),
    Case("finetune-train-same-file", FT.replace("{d}/good.de {d}/good.en",
                                                "{d}/good.en {d}/good.en"),
         "--train: the same file ({d}/good.en)"),
    Case("finetune-valid-same-file", FT.replace("--valid-tgt {d}/good.en",
                                                "--valid-tgt {d}/link.en"),
         "--valid-src/--valid-tgt: the same file"),
    Case("finetune-dp-train-same-file", FTDP.replace("{d}/good.de {d}/good.en",
                                                     "{d}/good.de {d}/link.en")
         + " --delta 1e-5", "--train: the same file"),
    Case("finetune-fp16-cpu", FT + " --fp16 --device cpu",
         "--fp16 needs --device cuda (mixed precision is a GPU feature)"),
    Case("evaluate-src-is-ref", "evaluate --src {d}/good.de --ref {d}/good.de --hyp "
         "{d}/good.en --out {d}/OUT", "--src/--ref: the same file ({d}/good.de) is both "
         "the source and the reference"),
    Case("stats-same-file", "stats --src {d}/good.de --tgt {d}/link.en", "--src/--tgt",
         out=None),
    Case("stats-train-same-file", "stats --train {d}/good.en {d}/good.en", "--train",
         out=None),
    Case("canaries-same-file", "audit canaries insert --src {d}/good.de --tgt "
         "{d}/good.de --out {d}/OUT", "--src/--tgt: the same file"),
    Case("reconstruct-same-file", "audit reconstruct --release {d}/norelease --src "
         "{d}/good.de --tgt {d}/link.en --out {d}/OUT", "--src/--tgt: the same file"),
    Case("membership-same-file", "audit membership --model {d}/filesmodel --members "
         "{d}/good.de {d}/good.de --non-members {d}/good --out {d}/OUT",
         "--members: the same file"),
    # an impossible split, an empty conversion (issue 31, item 4): refused before any work
    Case("split-more-than-the-file", "split --docs {d}/good.tsv --out {d}/OUT --train 100 "
         "--valid 3 --test 3", "--train 100: {d}/good.tsv holds 6 usable pairs in 6 "
         "documents, none left for train after --valid 3 and --test 3"),
    Case("split-valid-takes-all", "split --docs {d}/good.tsv --out {d}/OUT --valid 50",
         "--test 2,000: {d}/good.tsv holds 6 usable pairs"),
    Case("opus2tsv-tmx-other-languages", "opus2tsv --tmx {d}/fr.tmx --doc-prop doc --out "
         "{d}/OUT.tsv", "fr.tmx: no <tu> with a segment in both de and en (2 units read)",
         out="{d}/OUT.tsv"),
    Case("split-tmx-other-languages", "split --tmx {d}/fr.tmx --tmx-doc-prop doc --out "
         "{d}/OUT", "fr.tmx: no <tu> with a segment in both de and en"),
    # source and target swapped against the model's languages (de→en): refused before
    # the model loads, on the function words at the files' start (issue 31, item 4)
    Case("finetune-train-swapped", FT.replace("--train {d}/good.de {d}/good.en",
                                              "--train {d}/prose.en {d}/prose.de"),
         "--train: the files look swapped: {d}/prose.en (for de) reads as en and "
         "{d}/prose.de (for en) as de"),
    Case("finetune-valid-swapped", FT.replace("--valid-src {d}/good.de --valid-tgt "
                                              "{d}/good.en", "--valid-src {d}/prose.en "
                                              "--valid-tgt {d}/prose.de"),
         "--valid-src/--valid-tgt: the files look swapped"),
    Case("finetune-dp-train-swapped", FTDP.replace("--train {d}/good.de {d}/good.en",
                                                   "--train {d}/prose.en {d}/prose.de")
         + " --delta 1e-5", "--train: the files look swapped"),
    # a write that fails (full disk, quota, file too large) in the work dir or in OUT:
    # one line naming the file, exit 2, no OUT, no text left (issue 31, item 1)
    Case("extract-disk-full-work-dir", f"extract {PAIR} --out {{d}}/OUT --work-dir "
         "{d}/wd", "{d}/wd/nmtfrag-", fsize=100),
    # (60 pairs: each of the work dir's 8 shuffle buckets holds ~1/8 of the phrase pairs,
    # ~3.6 kB, each released side ~1/4, ~7 kB: the cap falls between, whatever the
    # unseeded draws; with 6 pairs a bucket sometimes crossed it first)
    Case("extract-disk-full-out", "extract --src {d}/big.de --tgt {d}/big.en --out {d}/OUT "
         "--work-dir {d}/wd", "{d}/OUT/phrases.", fsize=6000),
    Case("extract-disk-full-owner-manifest", f"extract {PAIR} --out {{d}}/OUT --work-dir "
         "{d}/wd", "{d}/OUT/owner/manifest.json", fsize=1000),
    Case("split-disk-full", "split --docs {d}/good.tsv --out {d}/OUT --train all --valid 1 "
         "--test 1", "{d}/OUT/train.de", fsize=60),
    Case("vocab-disk-full", f"vocab --dp {PAIR} --sigma 1 --delta 1e-3 --out {{d}}/OUT",
         "{d}/OUT/owner/manifest.json", fsize=100),
    Case("stats-disk-full", f"stats {PAIR} --out {{d}}/OUT", "{d}/OUT/report.json",
         fsize=100),
    # the global flag changes nothing for user mistakes
    Case("debug-flag-user-error", "evaluate --debug --src {d}/good.de --ref {d}/good.en "
         "--out {d}/OUT --hyp {d}/good.en --beam -1", "--beam"),
]


PROSE = {"de": "Die Dosis ist nicht für Kinder und wird mit dem Arzt auf der Packung "
               "des Herstellers angegeben .\n",
         "en": "The dose is not for children and it is given with the doctor on the "
               "pack of the maker .\n"}


def make_workspace(d):
    """The inputs the cases read: a good corpus and one bad file per defect."""
    os.makedirs(d, exist_ok=True)
    pairs = make_corpus(6, seed=3)
    write_parallel(pairs, os.path.join(d, "good"))
    write_parallel(make_corpus(60, seed=3), os.path.join(d, "big"))
    with open(os.path.join(d, "nul.de"), "wb") as f:
        f.write(b"das Haus .\nein\x00Test .\n" + b"x .\n" * 4)
    with open(os.path.join(d, "esc.en"), "wb") as f:
        f.write(b"the house .\na test .\nred \x1b[0m text .\n" + b"x .\n" * 3)
    with open(os.path.join(d, "latin1.de"), "wb") as f:
        f.write("Gr\u00fc\u00dfe .\n".encode("latin-1") + b"x .\n" * 5)
    with open(os.path.join(d, "short.en"), "w", encoding="utf-8") as f:
        f.write("one .\ntwo .\n")
    open(os.path.join(d, "empty.de"), "w").close()
    open(os.path.join(d, "afile"), "w").close()
    if not os.path.lexists(os.path.join(d, "link.en")):
        os.symlink("good.de", os.path.join(d, "link.en"))  # German under an .en name
    with open(os.path.join(d, "good.tsv"), "w", encoding="utf-8") as f:
        f.writelines(f"doc{k}\t{s}\t{t}\n" for k, (s, t) in enumerate(pairs))
    with open(os.path.join(d, "bad.tsv"), "w", encoding="utf-8") as f:
        f.write("doc1\tein Haus .\ta house .\ndoc2\tnur zwei Felder\n")
    for lang, line in PROSE.items():  # real function words (the toy corpus has none)
        with open(os.path.join(d, f"prose.{lang}"), "w", encoding="utf-8") as f:
            f.write(line * 6)
    with open(os.path.join(d, "fr.tmx"), "w", encoding="utf-8") as f:  # no German
        f.write('<tmx version="1.4"><header srclang="fr"/><body>' + "".join(
            f'<tu><prop type="doc">d{k}</prop><tuv xml:lang="fr"><seg>la maison {k}'
            f'</seg></tuv><tuv xml:lang="en"><seg>the house {k}</seg></tuv></tu>'
            for k in range(2)) + "</body></tmx>\n")
    # a model dir with a checkpoint name but no dictionaries or codes
    os.makedirs(os.path.join(d, "fakemodel"), exist_ok=True)
    open(os.path.join(d, "fakemodel", "model.pt"), "wb").close()
    # one whose files are there (the cheap check passes), none of them usable
    os.makedirs(os.path.join(d, "filesmodel"), exist_ok=True)
    open(os.path.join(d, "filesmodel", "model.pt"), "wb").close()
    for name in ("dict.de.txt", "dict.en.txt", "bpecodes"):
        with open(os.path.join(d, "filesmodel", name), "w", encoding="utf-8") as f:
            f.write("x 1\n")
    for name, eps in (("runs-nan.yaml", ".nan"), ("runs-neg.yaml", "-3")):
        with open(os.path.join(d, name), "w", encoding="utf-8") as f:
            f.write(f"runs:\n  - name: dp\n    epsilon: {eps}\n")
    return d


def run_case(case, d):
    """(exit code, stderr) of `python -m nmtfrag ARGV` in a clean environment."""
    argv = case.argv.format(d=d).split()
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1")

    def cap_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (case.fsize, case.fsize))

    proc = subprocess.run([sys.executable, "-m", "nmtfrag", *argv], capture_output=True,
                          text=True, env=env, cwd=d, stdin=subprocess.DEVNULL, timeout=120,
                          preexec_fn=cap_file_size if case.fsize else None)
    return proc.returncode, proc.stderr


def error_line(stderr):
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    return make_workspace(str(tmp_path_factory.mktemp("cli-errors")))


def test_the_table_covers_every_command():
    from nmtfrag.cli import COMMANDS

    firsts = {c.argv.split()[0] for c in CASES if not c.argv.startswith("evaluate --debug")}
    assert {name for name, _ in COMMANDS} <= firsts
    audits = {c.argv.split()[1] for c in CASES if c.argv.startswith("audit ")}
    assert audits == {"canaries", "reconstruct", "exposure", "membership", "compare"}
    assert len(CASES) >= 40 and len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_error_line_and_leaves_nothing(case, ws):
    before = snapshot(ws)
    code, stderr = run_case(case, ws)
    line = error_line(stderr)
    assert code == 2, stderr
    assert "Traceback" not in stderr, stderr
    assert line.startswith("error: "), stderr
    assert sum(ln.startswith("error:") for ln in stderr.splitlines()) == 1, stderr
    assert case.expect.format(d=ws) in line, line
    if case.fsize:
        assert line.endswith(": File too large"), line
    if case.out:
        assert not os.path.exists(case.out.format(d=ws)), "the failed run left its OUT"
    assert snapshot(ws) == before  # no input changed, no file added


# --- the CLI's own handling of failures (in-process, with a stand-in command) ---------

def _main_with(monkeypatch, run, argv):
    """nmtfrag.cli.main(argv) with `run` standing in for `stats`' command function."""
    from nmtfrag.cli import stats

    monkeypatch.setattr(stats, "run", run)
    from nmtfrag.cli import main

    return main(argv)


def test_unreadable_path_is_exit_2_naming_it(monkeypatch, capsys):
    def run(args):
        raise PermissionError(13, "Permission denied", "/data/secret.de")

    assert _main_with(monkeypatch, run, ["stats", "--src", "x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: /data/secret.de: Permission denied"]


def test_internal_error_is_exit_1_one_line_and_debug_shows_the_traceback(monkeypatch,
                                                                          capsys):
    def run(args):
        raise ZeroDivisionError("float division\nby zero")

    assert _main_with(monkeypatch, run, ["stats"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: internal error: ZeroDivisionError: "
                                               "float division by zero")
    assert "--debug" in err[0]
    with pytest.raises(ZeroDivisionError):
        _main_with(monkeypatch, run, ["stats", "--debug"])
    with pytest.raises(ZeroDivisionError):
        _main_with(monkeypatch, run, ["--debug", "stats"])


def _make_out_then(fail, out, files=()):
    """A command that creates OUT like every command does, writes `files`, then fails."""
    def run(args):
        from nmtfrag.outdir import prepare_output_dir

        prepare_output_dir(out)
        for name in files:
            os.makedirs(os.path.dirname(os.path.join(out, name)), exist_ok=True)
            with open(os.path.join(out, name), "w") as f:
                f.write("x\n")
        raise fail
    return run


def test_a_refused_run_removes_the_out_it_created(monkeypatch, tmp_path, capsys):
    from nmtfrag.errors import InputError

    out = str(tmp_path / "new")
    run = _make_out_then(InputError("--x is wrong"), out, files=[".work/corpus.src"])
    assert _main_with(monkeypatch, run, ["stats"]) == 2
    assert not os.path.exists(out)
    assert capsys.readouterr().err.strip() == "error: --x is wrong"


def test_a_directory_that_existed_before_is_never_removed(monkeypatch, tmp_path):
    from nmtfrag.errors import InputError

    out = tmp_path / "old"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    run = _make_out_then(InputError("no"), str(out))
    assert _main_with(monkeypatch, run, ["stats"]) == 2
    assert (out / "notes.txt").read_text() == "mine\n"


def test_a_crash_keeps_a_created_out_that_holds_files(monkeypatch, tmp_path):
    """An internal failure or an interruption after training began keeps what --resume
    needs; only an empty OUT goes."""
    kept, empty = str(tmp_path / "kept"), str(tmp_path / "empty")
    run = _make_out_then(RuntimeError("boom"), kept, files=["checkpoints/last.pt"])
    assert _main_with(monkeypatch, run, ["stats"]) == 1
    assert os.path.isfile(os.path.join(kept, "checkpoints", "last.pt"))
    assert _main_with(monkeypatch, _make_out_then(RuntimeError("boom"), empty),
                      ["stats"]) == 1
    assert not os.path.exists(empty)
    assert _main_with(monkeypatch, _make_out_then(KeyboardInterrupt(), kept + "2",
                                                  files=["a"]), ["stats"]) == 130
    assert os.path.isfile(os.path.join(kept + "2", "a"))


def test_a_finished_output_is_never_removed(monkeypatch, tmp_path):
    from nmtfrag.errors import InputError

    out = str(tmp_path / "done")
    run = _make_out_then(InputError("late"), out, files=["manifest.json"])
    assert _main_with(monkeypatch, run, ["stats"]) == 2
    assert os.path.isfile(os.path.join(out, "manifest.json"))


def test_control_bytes_are_refused_with_file_and_line(tmp_path):
    from nmtfrag.data.corpus import scan_text_file
    from nmtfrag.errors import InputError

    ok = tmp_path / "ok.txt"
    ok.write_bytes(b"tab\tseparated\r\nplain\n")
    assert scan_text_file(str(ok)) == 2  # tab and a CRLF ending are text
    for byte in (0x00, 0x07, 0x0b, 0x0c, 0x1b, 0x7f):
        p = tmp_path / f"c{byte}.txt"
        p.write_bytes(b"fine\nfine\nbad" + bytes([byte]) + b"line\n")
        with pytest.raises(InputError, match=rf"c{byte}\.txt line 3: .*0x{byte:02x}"):
            scan_text_file(str(p))


def markdown_table(d):
    """The battery as a Markdown table: command, input (workspace paths shortened),
    exit code, the error line."""
    rows = ["| command | input | exit | message |", "|---|---|---:|---|"]
    for case in CASES:
        code, stderr = run_case(case, d)
        words = case.argv.split()
        cmd = " ".join(words[:3 if words[0] == "audit" and words[1] == "canaries" else
                             2 if words[0] == "audit" else 1])
        shown = case.argv.replace("{d}/", "")
        msg = error_line(stderr).replace(d + "/", "").replace("|", "\\|")
        rows.append(f"| {cmd} | `{shown}` | {code} | {msg} |")
    return "\n".join(rows)


if __name__ == "__main__":
    import tempfile

    if sys.argv[1:] != ["--table"]:
        sys.exit("usage: python3 tests/cli/test_cli_errors.py --table")
    with tempfile.TemporaryDirectory() as tmp:
        print(markdown_table(make_workspace(os.path.join(tmp, "ws"))))


def test_the_library_refuses_the_sizes_the_options_refuse(tmp_path):
    """nmtfrag.limits holds for Python callers too: one InputError, nothing written."""
    from nmtfrag.audit.canaries import make_canaries
    from nmtfrag.fragment.dp_release import DPReleaseParams
    from nmtfrag.errors import InputError
    from nmtfrag.fragment.extract import extract_release
    from nmtfrag.limits import MAX_CANARIES, MAX_PHRASE_LEN, MAX_UNIT_CAP

    d = make_workspace(str(tmp_path / "ws"))
    with pytest.raises(InputError, match="--max-len must be between 1 and 100"):
        extract_release(f"{d}/good.de", f"{d}/good.en", str(tmp_path / "OUT"),
                        max_len=MAX_PHRASE_LEN + 1)
    assert not (tmp_path / "OUT").exists()
    with pytest.raises(InputError, match="--unit-cap must be at most 100,000"):
        DPReleaseParams(1.0, 1e-6, cap=MAX_UNIT_CAP + 1).check()
    with pytest.raises(InputError, match="at most 90,000"):
        make_canaries(MAX_CANARIES // 2 + 1, [1], seed=1)  # with as many unseen
    assert len(make_canaries(MAX_CANARIES // 2, [1], seed=1)) == MAX_CANARIES
