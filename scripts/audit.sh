#!/usr/bin/env bash
# The whole confidentiality comparison for one domain, with one command:
#   plant canaries → phrase release (+ reconstruction attack) → fine-tune on the release
#   and on the full sentences → BLEU, canary exposure for each model and for the
#   untouched baseline → one comparison report (report.md, report.json, plot).
#
#   bash scripts/audit.sh DATA_DIR MODEL_DIR OUT_DIR
#   e.g. bash scripts/audit.sh ../shared/data/indomain/EMEA ../shared/models/generic-deen-small runs/emea-audit
#
# DATA_DIR holds train/valid/test .de/.en, Moses-tokenised (as ../shared/data/indomain):
# every step is run with --pretokenized / --tokenized. Budgets (environment variables):
#   MAX_LEN=4 SAMPLE_RATE=0.5 TAG=1            phrase release
#   MAX_UPDATES=300 MAX_TOKENS=4096 THREADS=2  each fine-tuning run
#   TEST_LINES=300                             BLEU on the first N test lines
#   CANARY_COUNT=5 CANARY_REPEATS=1,10,100     canaries per repeat value (plus as many unseen)
#   SAMPLES=2000                               candidates sampled for the skew-normal fit
#   EXTRA_RUNS=FILE                            YAML run entries appended to runs.yaml
#                                              (e.g. DP models; paths relative to OUT_DIR)
#   SEED=1
# Steps whose output dir already holds a manifest.json are skipped, so a killed run can be
# restarted with the same command.
set -euo pipefail

if [ $# -ne 3 ]; then
    sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
DATA=$(cd "$1" && pwd)
MODEL=$(cd "$2" && pwd)
mkdir -p "$3"
OUT=$(cd "$3" && pwd)

MAX_LEN=${MAX_LEN:-4}
SAMPLE_RATE=${SAMPLE_RATE:-0.5}
TAG=${TAG:-1}
MAX_UPDATES=${MAX_UPDATES:-300}
MAX_TOKENS=${MAX_TOKENS:-4096}
THREADS=${THREADS:-2}
TEST_LINES=${TEST_LINES:-300}
CANARY_COUNT=${CANARY_COUNT:-5}
CANARY_REPEATS=${CANARY_REPEATS:-1,10,100}
SAMPLES=${SAMPLES:-2000}
SEED=${SEED:-1}

done_() { [ -f "$1/manifest.json" ]; }
step() { echo "== $(date -u +%H:%M:%S) $*" >&2; }

for f in train.de train.en valid.de valid.en test.de test.en; do
    [ -f "$DATA/$f" ] || { echo "error: $DATA/$f is missing" >&2; exit 2; }
done

step "canaries ($CANARY_COUNT per repeat value $CANARY_REPEATS, plus $CANARY_COUNT unseen)"
done_ "$OUT/canaried" || nmtfrag audit canaries insert --src "$DATA/train.de" --tgt "$DATA/train.en" \
    --count "$CANARY_COUNT" --repeats "$CANARY_REPEATS" --seed "$SEED" --out "$OUT/canaried"

TAGFLAG=(); TAGNAME=""
if [ "$TAG" = 1 ]; then TAGFLAG=(--tag); TAGNAME="-tag"; fi
REL="release-L$MAX_LEN-r$SAMPLE_RATE$TAGNAME"
step "phrase release $REL"
done_ "$OUT/$REL" || nmtfrag extract --src "$OUT/canaried/train.de" --tgt "$OUT/canaried/train.en" \
    --out "$OUT/$REL" --max-len "$MAX_LEN" --sample-rate "$SAMPLE_RATE" "${TAGFLAG[@]}" \
    --seed "$SEED" --pretokenized

step "reconstruction attack on $REL"
done_ "$OUT/reconstruct-$REL" || nmtfrag audit reconstruct --release "$OUT/$REL" \
    --src "$OUT/canaried/train.de" --tgt "$OUT/canaried/train.en" --mode both \
    --out "$OUT/reconstruct-$REL"

FT=(--valid-src "$DATA/valid.de" --valid-tgt "$DATA/valid.en" --pretokenized
    --max-updates "$MAX_UPDATES" --max-tokens "$MAX_TOKENS" --threads "$THREADS"
    --seed "$SEED" --validate-every "$MAX_UPDATES" -q)
step "fine-tune on the release ($MAX_UPDATES updates)"
done_ "$OUT/model-phrases" || nmtfrag finetune --model "$MODEL" --train "$OUT/$REL" \
    --out "$OUT/model-phrases" "${FT[@]}"
step "fine-tune on the full sentences ($MAX_UPDATES updates)"
done_ "$OUT/model-sentences" || nmtfrag finetune --model "$MODEL" \
    --train "$OUT/canaried/train.de" "$OUT/canaried/train.en" --out "$OUT/model-sentences" "${FT[@]}"

for run in baseline phrases sentences; do
    if [ $run = baseline ]; then m=$MODEL; else m=$OUT/model-$run; fi
    step "evaluate $run (first $TEST_LINES test lines)"
    done_ "$OUT/eval-$run" || nmtfrag evaluate --model "$m" --src "$DATA/test.de" --ref "$DATA/test.en" \
        --tokenized --first "$TEST_LINES" --threads "$THREADS" --name "$run" --out "$OUT/eval-$run"
    step "canary exposure $run"
    done_ "$OUT/exposure-$run" || nmtfrag audit exposure --model "$m" \
        --canaries "$OUT/canaried/canaries.json" --samples "$SAMPLES" --seed "$SEED" \
        --threads "$THREADS" --out "$OUT/exposure-$run"
done

step "comparison report"
cat > "$OUT/runs.yaml" <<EOF
title: $(basename "$DATA"), $(basename "$MODEL"), $MAX_UPDATES updates
runs:
  - name: baseline
    approach: no fine-tuning
    evaluate: eval-baseline
    exposure: exposure-baseline
  - name: phrases
    approach: phrase release, max-len $MAX_LEN, sample-rate $SAMPLE_RATE, tag $TAG
    evaluate: eval-phrases
    reconstruction: reconstruct-$REL
    exposure: exposure-phrases
  - name: sentences
    approach: full-sentence fine-tuning
    evaluate: eval-sentences
    exposure: exposure-sentences
EOF
if [ -n "${EXTRA_RUNS:-}" ]; then cat "$EXTRA_RUNS" >> "$OUT/runs.yaml"; fi
nmtfrag audit compare --runs "$OUT/runs.yaml" --out "$OUT/comparison" --overwrite
step "done: $OUT/comparison/report.md"
