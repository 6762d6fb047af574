#!/usr/bin/env bash
# The whole nmtfrag flow, offline, on the bundled demo corpus, in a few minutes on 2 CPU
# cores: train a toy base model, then one decision study (corpora/demo/study.toml): a
# release of tagged phrase pairs and its reconstruction audit, fine-tuning on the
# release, on the full sentences and with DP-SGD, evaluation, canaries and membership
# inference of every model, and one report.
#
# usage: bash scripts/demo.sh [OUT]        (default OUT: demo-run/)
#
# The toy base model is trained on the demo corpus itself (no generic corpus ships with
# nmtfrag), so the BLEU figures show the pipeline working, not a domain-adaptation gain;
# for real figures use a WMT19-layout model (see docs/guide/model.md). Rerunning continues where the
# last run stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-demo-run}
mkdir -p "$OUT"
if [ ! -f "$OUT/base/model.pt" ]; then
  echo "demo: toy base model, trained on the demo corpus (~1 min)" >&2
  python3 scripts/toy_model.py --train corpora/demo/train --valid corpora/demo/valid \
    --out "$OUT/base" --updates 200 > /dev/null
fi
DEMO_MODEL="$OUT/base" nmtfrag study run corpora/demo/study.toml --out "$OUT/study"
echo
cat "$OUT/study/report/report.md"
