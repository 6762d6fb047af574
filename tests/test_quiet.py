"""Quiet by default (nmtfrag.quiet): third-party warnings and INFO lines stay off the
terminal, nmtfrag's own lines and every warning-level log record stay on it, `translate`
writes translations only, and `nmtfrag -v` shows the noise again."""
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _env():
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTHONWARNINGS", None)
    return env


def _translate(model, lines, *pre):
    return subprocess.run([sys.executable, "-m", "nmtfrag", *pre, "translate", "--model",
                           model, "--threads", "1"], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, env=_env(), timeout=300)


def test_translate_prints_translations_only(tiny_model_dir):
    lines = ["der Hund läuft .", "die Katze schläft ."]
    r = _translate(tiny_model_dir, lines)
    assert r.returncode == 0, r.stderr
    out = r.stdout.split("\n")
    assert out[-1] == "" and len(out) == len(lines) + 1  # one line per input, nothing else
    assert r.stderr == ""  # no fairseq INFO, tensorboardX line, torch warning, fastBPE path
    loud = _translate(tiny_model_dir, lines, "-v")
    assert loud.returncode == 0 and loud.stdout == r.stdout  # same translations
    assert "Loading codes from" in loud.stderr and "INFO" in loud.stderr


def _run_in_child(code, verbose):
    """install() in a fresh interpreter (it changes global logging and warning state)."""
    prog = ("import logging, warnings\n"
            "from nmtfrag.quiet import install\n"
            f"install(verbose={verbose})\n" + code)
    return subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                          env=_env(), timeout=60)


@pytest.mark.parametrize("verbose", [False, True])
def test_filters_third_party_info_and_warnings_but_not_ours(verbose):
    code = ("logging.getLogger('fairseq.tasks').info('THEIR-INFO')\n"
            "logging.getLogger('hydra.core').debug('THEIR-DEBUG')\n"
            "logging.getLogger('fairseq').warning('THEIR-WARNING')\n"
            "logging.getLogger('nmtfrag.train.finetune').info('OUR-INFO')\n"
            "warnings.warn('A-USERWARNING')\n"
            "warnings.warn('A-FUTUREWARNING', FutureWarning)\n"
            # fairseq_cli.train's import-time set-up must not re-route logging to stdout
            "logging.basicConfig(stream=__import__('sys').stdout, level=logging.INFO)\n"
            "logging.getLogger('fairseq_cli.train').warning('AFTER-BASICCONFIG')\n")
    r = _run_in_child(code, verbose)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    assert "THEIR-WARNING" in r.stderr and "OUR-INFO" in r.stderr
    assert "AFTER-BASICCONFIG" in r.stderr
    assert "THEIR-DEBUG" not in r.stderr
    for noise in ("THEIR-INFO", "A-USERWARNING", "A-FUTUREWARNING"):
        assert (noise in r.stderr) == verbose, noise


def test_silence_stderr_mutes_c_level_output_and_restores_fd2():
    code = ("import os, sys\n"
            "from nmtfrag.quiet import silence_stderr\n"
            "with silence_stderr():\n"
            "    os.write(2, b'C-LEVEL\\n')\n"
            "os.write(2, b'AFTER\\n')\n")
    quiet = _run_in_child(code, False)
    assert quiet.stderr == "AFTER\n"
    assert _run_in_child(code, True).stderr == "C-LEVEL\nAFTER\n"
