#!/usr/bin/env bash
# Install nmtfrag and everything it needs, in the current Python environment.
#
# Why a script and not a plain `pip install .`: two of our dependencies cannot be built
# in pip's isolated build environment on Python 3.11 (see DESIGN notes in README):
#  - fairseq 0.12.2 does not import on Python 3.11; the `fairseq-fixed` fork does, but
#    its isolated build would pull a multi-GB CUDA torch, so it is built against ours;
#  - fastBPE 0.1.0 ships a stale generated .cpp and needs Cython present at build time.
# So we install torch and the build tools first, then build those two without isolation.
set -euo pipefail
PY=${PYTHON:-python3}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}

$PY -m pip install --quiet "torch==${TORCH_VERSION}" "cython>=3" numpy wheel setuptools
$PY -m pip install --quiet --no-build-isolation "fairseq-fixed==0.12.3.1" "fastbpe==0.1.0"
# ct2: the optional CTranslate2 engine (`--engine ctranslate2`); installed here so the
# test suite compares it with fairseq instead of skipping that comparison.
$PY -m pip install --quiet --no-build-isolation -e ".[test,ct2]"
$PY -c "import fairseq, fastBPE, eflomal, sacremoses, sacrebleu, opacus, ctranslate2; print('nmtfrag: dependencies import fine')"
# the compiled extraction core is optional (pure-Python fallback, same output): say which
(cd / && $PY -c "import importlib.util as u; print('nmtfrag: extraction core', 'compiled' if u.find_spec('nmtfrag._phrases_fast') else 'pure Python (no C compiler or Cython at install)')")
