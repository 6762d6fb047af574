"""A failed write is an error, never a result (issue 31, item 1).

A full disk gave `extract` a finished, empty release with exit 0 (eflomal's failed write
read as "no alignment links"), and `error: internal error: OSError: [Errno 28] ...`
(exit 1, no path) elsewhere, with `finetune`'s training text left in OUT/.work. Now:
one `error: PATH: reason` line, exit 2, no OUT, nothing left in the work dir, inputs
unchanged; an aligner's short output is refused.

No file system is mounted: a file size limit (RLIMIT_FSIZE, SIGXFSZ ignored so a write
fails with EFBIG) in a subprocess makes writes fail at different points of a run, and an
injected eflomal writes short output.
"""
import errno
import os
import re
import resource
import signal
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from test_output_guard import tree as snapshot  # noqa: E402 (every file's SHA-256)
from tinymodel import make_corpus, make_tiny_model_dir, write_parallel  # noqa: E402

from nmtfrag.cli import main  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINE = re.compile(r"^error: (/\S+): File too large$")


def run_limited(argv, limit, cwd):
    """(exit code, stderr) of `python -m nmtfrag ARGV` with files capped at `limit` bytes."""
    def cap():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "nmtfrag", *argv], capture_output=True,
                          text=True, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                          preexec_fn=cap, timeout=300)
    return proc.returncode, proc.stderr


def files_under(path):
    return [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]


def check_failed_write(code, err, out, work=None):
    """Exit 2, one error line naming the file, no OUT, no work-dir file: the path."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, err
    assert sum(ln.startswith("error:") for ln in lines) == 1, err
    m = LINE.match(lines[-1])
    assert m, err
    assert "Traceback" not in err and "internal error" not in err
    assert not os.path.exists(out), files_under(out)
    if work is not None:
        assert files_under(work) == [], files_under(work)
    return m.group(1)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("diskfull")
    write_parallel(make_corpus(400, seed=1), str(d / "c"))
    return d


def test_extract_write_failures_in_work_dir_and_out(corpus):
    """Writes failing in the work dir (tokenised text, eflomal's files) and in OUT (the
    release): each one line naming the file, exit 2, no release, no text left."""
    before = snapshot(str(corpus))
    named = []
    for limit in (100, 4000, 16000, 40000):
        out, work = str(corpus / f"OUT{limit}"), str(corpus / f"work{limit}")
        code, err = run_limited(["extract", "--src", str(corpus / "c.de"), "--tgt",
                                 str(corpus / "c.en"), "--out", out, "--work-dir", work],
                                limit, str(corpus))
        named.append(check_failed_write(code, err, out, work))
    assert any(p.startswith(str(corpus / "work")) for p in named), named
    assert any(p.startswith(str(corpus / "OUT")) for p in named), named
    after = snapshot(str(corpus))
    assert {k: v for k, v in after.items() if k in before} == before  # inputs unchanged


def _short_eflomal(monkeypatch, keep):
    """eflomal that writes only the first `keep` lines of each link file."""
    import eflomal

    real = eflomal.Aligner.align

    def align(self, src, tgt, links_filename_fwd=None, links_filename_rev=None, **kw):
        real(self, src, tgt, links_filename_fwd=links_filename_fwd,
             links_filename_rev=links_filename_rev, **kw)
        for path in (links_filename_fwd, links_filename_rev):
            with open(path, encoding="utf-8") as f:
                lines = f.readlines()[:keep]
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(lines)

    monkeypatch.setattr(eflomal.Aligner, "align", align)


def test_short_eflomal_output_is_no_release(corpus, tmp_path, monkeypatch, capsys):
    """eflomal's output missing lines (a failed write) was read as 'no links': now a
    failed tool, exit 1, one line naming the file, no release."""
    _short_eflomal(monkeypatch, keep=100)
    out, work = str(tmp_path / "OUT"), str(tmp_path / "work")
    code = main(["extract", "--src", str(corpus / "c.de"), "--tgt", str(corpus / "c.en"),
                 "--out", out, "--work-dir", work])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert re.match(r"^error: /\S+/align\.fwd: eflomal wrote 100 of 400 lines \(one "
                    r"alignment line per sentence pair expected\)", err[-1]), err
    assert not os.path.exists(out) and files_under(work) == []


def test_short_eflomal_output_on_a_full_disk_names_the_file(corpus, tmp_path, monkeypatch,
                                                           capsys):
    """The same on a file system with no room left: ENOSPC naming the file, exit 2."""
    _short_eflomal(monkeypatch, keep=0)

    class Full:
        f_bavail = 0
        f_favail = 100

    monkeypatch.setattr(os, "statvfs", lambda path: Full())
    out = str(tmp_path / "OUT")
    code = main(["extract", "--src", str(corpus / "c.de"), "--tgt", str(corpus / "c.en"),
                 "--out", out, "--work-dir", str(tmp_path / "work")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert re.match(rf"^error: /\S+/align\.fwd: {os.strerror(errno.ENOSPC)}$", err[-1]), err
    assert not os.path.exists(out)


def test_check_links_file(tmp_path):
    from nmtfrag.data.corpus import count_lines
    from nmtfrag.fragment.align import check_links_file
    from nmtfrag.errors import ToolFailed

    p = tmp_path / "links"
    p.write_text("0-0\n\n1-1")  # an empty line (no links) is a line; so is the last one
    assert count_lines(str(p)) == 3
    check_links_file(str(p), 3)
    with pytest.raises(ToolFailed, match="eflomal wrote 3 of 4 lines"):
        check_links_file(str(p), 4)
    with pytest.raises(ToolFailed, match="eflomal wrote no file"):
        check_links_file(str(tmp_path / "missing"), 4)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return make_tiny_model_dir(str(tmp_path_factory.mktemp("diskfull-model")))


@pytest.mark.parametrize("limit,where", [(8000, ".work/train.de"),
                                         (30000, ".work/init.pt"),
                                         (140000, None)])  # fairseq's checkpoint: OUT
@pytest.mark.parametrize("existing_out", [False, True], ids=["new-out", "overwrite"])
def test_finetune_data_preparation_write_failure(model, corpus, tmp_path, limit, where,
                                                 existing_out):
    """finetune's data preparation (BPE text, the init checkpoint) on a full disk: one
    line naming the file, exit 2, no OUT (or, into an OUT that was there, no training
    text left in OUT/.work, no half-saved checkpoint); fairseq's failed checkpoint save
    names OUT."""
    write_parallel(make_corpus(300, seed=12), str(tmp_path / "tr"))
    write_parallel(make_corpus(30, seed=11), str(tmp_path / "va"))
    out = str(tmp_path / "FT")
    extra = []
    if existing_out:
        os.makedirs(out)
        extra = ["--overwrite"]
    code, err = run_limited(
        ["finetune", "--model", model, "--train", str(tmp_path / "tr.de"),
         str(tmp_path / "tr.en"), "--valid-src", str(tmp_path / "va.de"), "--valid-tgt",
         str(tmp_path / "va.en"), "--out", out, "--max-updates", "1", "--device", "cpu",
         *extra], limit, str(tmp_path))
    if existing_out:  # fairseq's log may stay (loss lines, no text); nothing else
        left = [os.path.relpath(p, out) for p in files_under(out)]
        assert code == 2 and set(left) <= {"train.log"}, (err, left)
        assert LINE.match(err.strip().splitlines()[-1]), err
        path = LINE.match(err.strip().splitlines()[-1]).group(1)
    else:
        path = check_failed_write(code, err, out)
    assert path == (out if where is None else os.path.join(out, where))


def test_binarized_and_bpe_outputs_are_checked(tmp_path):
    """fairseq-preprocess output without one sentence per line, and fastBPE returning
    fewer lines, are failed tools, never data."""
    from nmtfrag.train.binarize import check_binarized
    from nmtfrag.data.bpe import BPE
    from nmtfrag.errors import ToolFailed

    (tmp_path / "train.de").write_text("a\nb\n")
    (tmp_path / "train.en").write_text("a\nb\n")
    with pytest.raises(ToolFailed, match=r"train\.de-en\.de\.bin: fairseq-preprocess wrote "
                                         r"no readable data for 2 lines"):
        check_binarized({"train": str(tmp_path / "train")}, str(tmp_path / "bin"), "de",
                        "en", {"train": {"lines": 2}})

    class Short:
        def apply(self, lines):
            return lines[:-1]

    bpe = BPE.__new__(BPE)
    bpe.codes_path, bpe._bpe = "codes", Short()
    with pytest.raises(ToolFailed, match="codes: fastBPE returned 1 lines for 2"):
        bpe.apply(["a", "b"])


def test_a_resumable_finetune_on_a_full_disk_says_what_it_kept(model, tmp_path, monkeypatch,
                                                              capsys):
    """A full disk after fairseq's last checkpoint: OUT keeps it (and the prepared data),
    the one line says so and why, and --resume then finishes the run."""
    import nmtfrag.train.finetune as ft

    write_parallel(make_corpus(300, seed=12), str(tmp_path / "tr"))
    write_parallel(make_corpus(30, seed=11), str(tmp_path / "va"))
    out = str(tmp_path / "FT")
    argv = ["finetune", "--model", model, "--train", str(tmp_path / "tr.de"),
            str(tmp_path / "tr.en"), "--valid-src", str(tmp_path / "va.de"),
            "--valid-tgt", str(tmp_path / "va.en"), "--out", out, "--max-updates", "1",
            "--device", "cpu"]

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # names no file

    with monkeypatch.context() as m:
        m.setattr(ft, "keep_best", full)
        assert main(argv) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line == (f"error: {out}: {os.strerror(errno.ENOSPC)}; {out} keeps the run's last "
                    f"checkpoint, checkpoints/checkpoint_last.pt, and its prepared data in "
                    f".work/ (the training text): free space and continue with --resume, "
                    f"or remove {out}"), line
    assert os.path.isfile(os.path.join(out, "checkpoints", "checkpoint_last.pt"))
    assert not os.path.exists(os.path.join(out, "manifest.json"))
    assert main(argv + ["--resume"]) == 0
    assert os.path.isfile(os.path.join(out, "manifest.json"))
    assert not os.path.exists(os.path.join(out, ".work"))


def test_a_resumable_dp_run_on_a_full_disk_says_what_it_kept(model, tmp_path, monkeypatch,
                                                            capsys):
    """finetune --dp: a full disk after a saved step keeps OUT's DP state and says so;
    without a saved state OUT goes (one line naming it, exit 2)."""
    import nmtfrag.dp.engine as engine
    from nmtfrag.dp import resume

    write_parallel(make_corpus(60, seed=12), str(tmp_path / "tr"))
    out = str(tmp_path / "DP")
    argv = ["finetune", "--model", model, "--train", str(tmp_path / "tr.de"),
            str(tmp_path / "tr.en"), "--no-validation", "--threads", "1", "-q", "--dp",
            "--delta", "1e-3", "--noise-multiplier", "1", "--sample-rate", "0.25",
            "--physical-batch", "16", "--dp-steps", "2", "--seed", "3", "--out", out]

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # names no file

    with monkeypatch.context() as m:
        m.setattr(engine, "write_trained_model", full)
        assert main(argv + ["--dp-save-every", "1"]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    # (the write failed inside the run's private work dir: that is the path named)
    assert re.match(rf"^error: /\S+: {os.strerror(errno.ENOSPC)}; {re.escape(out)} keeps "
                    rf"the DP run's state as last saved; continue with --resume", line), line
    assert line.endswith("; free space first"), line
    assert os.path.isfile(resume.state_path(out))
    assert main(argv + ["--resume", "--dp-save-every", "1"]) == 0
    assert os.path.isfile(os.path.join(out, "manifest.json"))
    with monkeypatch.context() as m:  # nothing saved: nothing kept
        m.setattr(engine, "write_trained_model", full)
        assert main(argv[:-1] + [str(tmp_path / "DP0"), "--dp-save-every", "0"]) == 2
    assert re.match(rf"^error: /\S+: {os.strerror(errno.ENOSPC)}$",
                    capsys.readouterr().err.strip().splitlines()[-1])
    assert not os.path.exists(tmp_path / "DP0")
