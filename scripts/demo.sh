#!/usr/bin/env bash
# The whole nmtfrag flow, offline, on the bundled demo corpus, in a few minutes on 2 CPU
# cores: train a toy base model → release tagged phrase pairs → audit the release →
# fine-tune the toy model on the release and on the full sentences → evaluate → one
# comparison report.
#
# usage: bash scripts/demo.sh [OUT]        (default OUT: demo-run/)
#
# The toy base model is trained on the demo corpus itself (no generic corpus ships with
# nmtfrag), so the BLEU figures show the pipeline working, not a domain-adaptation gain;
# for real figures use a WMT19-layout model (see README). Finished steps are skipped on a
# rerun. THREADS (default 2) sets torch's CPU threads. Fine-tuning on a model that has
# already seen the corpus may raise the validation loss: finetune prints a note then.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-demo-run}
THREADS=${THREADS:-2}
D=corpora/demo
mkdir -p "$OUT"
step() { printf '\n== %s\n' "$*" >&2; }

step "toy base model (trained on the demo corpus; ~1 min)"
[ -f "$OUT/base/model.pt" ] || python3 -m nmtfrag.toymodel --train "$D/train" \
  --valid "$D/valid" --out "$OUT/base" --updates 200

step "release: tagged phrase pairs of at most 4 words, half of them"
[ -f "$OUT/release/manifest.json" ] || nmtfrag extract --src "$D/train.de" \
  --tgt "$D/train.en" --out "$OUT/release" --max-len 4 --sample-rate 0.5 --tag

step "audit the release: what the reconstruction attack rebuilds (both modes)"
[ -f "$OUT/audit-release/report.json" ] || nmtfrag audit reconstruct \
  --release "$OUT/release" --src "$D/train.de" --tgt "$D/train.en" --mode both \
  --out "$OUT/audit-release"

for run in phrases sentences; do
  step "fine-tune on the $run"
  if [ "$run" = phrases ]; then train=("$OUT/release"); else train=("$D/train.de" "$D/train.en"); fi
  [ -f "$OUT/ft-$run/manifest.json" ] || nmtfrag finetune --model "$OUT/base" \
    --train "${train[@]}" --valid-src "$D/valid.de" --valid-tgt "$D/valid.en" \
    --out "$OUT/ft-$run" --max-updates 50 --validate-every 25 --lr 0.0005 \
    --max-tokens 1000 --threads "$THREADS" -q > /dev/null
done

step "evaluate (SacreBLEU, paired bootstrap against the base model)"
[ -f "$OUT/eval-base/report.json" ] || nmtfrag evaluate --model "$OUT/base" \
  --src "$D/test.de" --ref "$D/test.en" --out "$OUT/eval-base" --threads "$THREADS"
for run in phrases sentences; do
  [ -f "$OUT/eval-$run/report.json" ] || nmtfrag evaluate --model "$OUT/ft-$run" \
    --src "$D/test.de" --ref "$D/test.en" --out "$OUT/eval-$run" \
    --baseline "$OUT/eval-base" --threads "$THREADS"
done

step "membership inference on each model (training pairs vs the held-out test set)"
for run in base ft-phrases ft-sentences; do
  model="$OUT/$run"
  [ -f "$OUT/mi-$run/report.json" ] || nmtfrag audit membership --model "$model" \
    --members "$D/train.de" "$D/train.en" --non-members "$D/test.de" "$D/test.en" \
    --seed 1 --out "$OUT/mi-$run" --threads "$THREADS"
done

step "comparison report"
cat > "$OUT/runs.yaml" <<EOF
title: demo corpus, toy model
runs:
  - {name: base, approach: "toy base model, trained on the demo corpus (it saw every training pair: no privacy)", evaluate: eval-base, membership: mi-base}
  - {name: phrases, approach: "tagged phrase pairs, max-len 4, rate 0.5", evaluate: eval-phrases, reconstruction: audit-release, membership: mi-ft-phrases}
  - {name: sentences, approach: full sentences, evaluate: eval-sentences, membership: mi-ft-sentences}
EOF
nmtfrag audit compare --runs "$OUT/runs.yaml" --out "$OUT/comparison" --overwrite
echo
cat "$OUT/comparison/report.md"
echo "report: $OUT/comparison/report.md (plot: $OUT/comparison/privacy_utility.png)"
