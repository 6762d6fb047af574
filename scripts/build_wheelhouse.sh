#!/usr/bin/env bash
# Build the wheels that install nmtfrag on a machine with no network (e.g. a borrowed GPU
# machine whose image has a CUDA PyTorch but none of our other dependencies).
#
# usage: scripts/build_wheelhouse.sh DIR [HAVE]
#   DIR   where the wheels go (created; wheels already there are kept)
#   HAVE  optional: the target's `python3 -m pip freeze` (or one package name a line):
#         packages named there are not carried (pip there keeps the installed ones), and
#         its `name==version` lines constrain what the carried ones are resolved against
#   PYTHON=python3.12  the interpreter of the target's Python version (default python3);
#         compiled wheels are built for it, here, so build on the target's architecture
#   TORCH_VERSION (default 2.13.0): the torch a source build of fairseq-fixed compiles
#         against here; give the target's version
#
# Then, on the target: python3 -m pip install --no-index --find-links DIR 'nmtfrag[ct2]'
#
# Why a script: fastBPE (and fairseq-fixed, where the index has no wheel for this Python)
# cannot be built in pip's isolated build (see scripts/install.sh); torch, torchaudio and
# torch's CUDA parts are never carried (the target has its own build, the CUDA one).
set -euo pipefail
[ $# -ge 1 ] && [ $# -le 2 ] || { sed -n 5,15p "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
DIR=$1; HAVE=${2:-}
PY=${PYTHON:-python3}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ -z "$HAVE" ] || [ -r "$HAVE" ] || { echo "error: $HAVE: not readable" >&2; exit 2; }
"$PY" -c "" 2>/dev/null || { echo "error: $PY does not run (set PYTHON)" >&2; exit 2; }
mkdir -p "$DIR"; DIR=$(cd "$DIR" && pwd)

WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
echo "wheelhouse: a build environment for $("$PY" --version) …"
"$PY" -m venv "$WORK/venv"; VPY=$WORK/venv/bin/python
"$VPY" -m pip install --quiet --upgrade pip
CPU_INDEX=https://download.pytorch.org/whl/cpu   # torch's small CPU build, where reachable
index=(); "$VPY" -c "import urllib.request as u; u.urlopen('$CPU_INDEX/torch/', timeout=10)" \
    2>/dev/null && index=(--extra-index-url "$CPU_INDEX")
"$VPY" -m pip install --quiet "${index[@]}" "torch==$TORCH_VERSION"
"$VPY" -m pip install --quiet "cython>=3" numpy wheel setuptools

echo "wheelhouse: building nmtfrag, fairseq-fixed, fastBPE …"
"$VPY" -m pip wheel --quiet --no-deps --no-build-isolation -w "$DIR" \
    "fairseq-fixed==0.12.3.1" "fastbpe==0.1.0" "$ROOT"
# pip's name normalisation (lower case, runs of - _ . as one -), the version cut off
normalise() { tr 'A-Z' 'a-z' | sed -E 's/^[[:space:]]+//; s/[[:space:]=<>~!;@[].*//;
                                        s/[-_.]+/-/g'; }
# What the rest is: every package nmtfrag[ct2] needs, as this Python resolves it against
# this torch and the target's own versions (HAVE's pins, local versions dropped)
echo "torch==$TORCH_VERSION" > "$WORK/constraints.txt"
[ -z "$HAVE" ] || sed -n -E '/^[A-Za-z0-9]/{/==/{/^(torch|torchaudio)==/d; s/\+[^ ;]*//; p}}' \
    "$HAVE" >> "$WORK/constraints.txt"
"$VPY" -m pip install --quiet --no-build-isolation --find-links "$DIR" \
    -c "$WORK/constraints.txt" "nmtfrag[ct2]"

skip="torch torchaudio nmtfrag fairseq-fixed fastbpe pip setuptools wheel"
[ -z "$HAVE" ] || skip="$skip $(sed '/^[[:space:]]*#/d; /^[[:space:]]*-/d' "$HAVE" \
    | normalise | tr '\n' ' ')"
carried=0
while IFS= read -r req; do
  name=$(echo "$req" | normalise)
  case " $skip " in *" $name "*) continue ;; esac
  case "$name" in nvidia-*|triton) continue ;; esac   # torch's own CUDA parts
  "$VPY" -m pip wheel --quiet --no-deps --no-build-isolation -w "$DIR" "$req"
  carried=$((carried + 1))
done < <("$VPY" -m pip freeze --all | grep '==')
echo "wheelhouse: $DIR: $(ls "$DIR" | wc -l) wheels ($carried dependencies carried)," \
     "$(du -sh "$DIR" | cut -f1)"
echo "on the target: python3 -m pip install --no-index --find-links $DIR 'nmtfrag[ct2]'"
