#!/usr/bin/env bash
# Install nmtfrag and everything it needs, in the current Python environment.
#
# Why a script and not a plain `pip install .`: two of our dependencies cannot be built
# in pip's isolated build environment on Python 3.11 (see docs/install.md):
#  - fairseq 0.12.2 does not import on Python 3.11; the `fairseq-fixed` fork does, but
#    its isolated build would pull a multi-GB CUDA torch, so it is built against ours;
#  - fastBPE 0.1.0 ships a stale generated .cpp and needs Cython present at build time.
# So we install torch and the build tools first, then build those two without isolation.
#
# Which torch: TORCH_VARIANT=cpu (default) or cuda.
#  - cpu: torch's CPU-only build from PyTorch's own wheel index (about 200 MB). Where that
#    index cannot be reached (an offline mirror), plain PyPI is used and the script says so.
#  - cuda: torch from PyPI, whose Linux x86_64 wheel is the CUDA build (several GB, with
#    the CUDA libraries it needs). Or install the torch build you want first: an installed
#    torch==TORCH_VERSION is kept either way.
set -euo pipefail
PY=${PYTHON:-python3}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
TORCH_VARIANT=${TORCH_VARIANT:-cpu}
TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu

torch_index=()
case "$TORCH_VARIANT" in
  cpu)
    if $PY -c "import urllib.request as u; u.urlopen('$TORCH_CPU_INDEX/torch/', timeout=10)" \
        2>/dev/null; then
      torch_index=(--extra-index-url "$TORCH_CPU_INDEX")  # +cpu wins over PyPI's build
    else
      echo "nmtfrag: $TORCH_CPU_INDEX not reachable: torch from the configured index"
    fi ;;
  cuda) ;;
  *) echo "error: TORCH_VARIANT must be cpu or cuda, not '$TORCH_VARIANT'" >&2; exit 2 ;;
esac

$PY -m pip install --quiet "${torch_index[@]}" "torch==${TORCH_VERSION}"
$PY -m pip install --quiet "cython>=3" numpy wheel setuptools
$PY -m pip install --quiet --no-build-isolation "fairseq-fixed==0.12.3.1" "fastbpe==0.1.0"
# ct2: the optional CTranslate2 engine (`--engine ctranslate2`); installed here so the
# test suite compares it with fairseq instead of skipping that comparison.
$PY -m pip install --quiet --no-build-isolation -e ".[test,ct2]"
$PY -c "import fairseq, fastBPE, eflomal, sacremoses, sacrebleu, opacus, ctranslate2; print('nmtfrag: dependencies import fine')"
$PY -c "import torch; print('nmtfrag: torch', torch.__version__, '(CUDA ' + torch.version.cuda + ' build)' if torch.version.cuda else '(CPU-only build)')"
# the compiled extraction core is optional (pure-Python fallback, same output): say which
(cd / && $PY -c "import importlib.util as u; print('nmtfrag: extraction core', 'compiled' if u.find_spec('nmtfrag.fragment._phrases_fast') else 'pure Python (no C compiler or Cython at install)')")
