#!/usr/bin/env bash
# The decision report for one domain: every confidentiality approach with one update
# budget (the DP-SGD cell: its recipe's own) and one test set, side by side — BLEU/chrF (paired bootstrap against the
# baseline), output/reference length, what each release lets an attacker rebuild, canary
# exposure and membership inference of each model, ε where there is a guarantee.
#
# usage: scripts/compare.sh [--fp16] DOMAIN          e.g. scripts/compare.sh EMEA
#
# Required (environment):
#   MODEL        WMT19-layout model dir (e.g. ../shared/models/generic-deen-medium; the
#                real one: wmt19.de-en.joined-dict.ensemble with CHECKPOINT=model1.pt)
#   DATA_ROOT    parent of DOMAIN/{train,valid,test}.{de,en}, Moses-tokenised
# Approaches and budget:
#   APPROACHES   cells besides the baseline (default: all of
#                "len4 len4-tag len7 len7-tag sent dp-release dp-sgd"): phrase releases of
#                max length 4/7 without/with <P> tags, full sentences, a DP set-union
#                release (max-len 4, tagged), DP-SGD on the full sentences
#   UPDATES      updates of every fine-tuning cell (default "pass": one pass of the
#                full-sentence cell over the owner's data, then that count for every cell)
#   MAX_TOKENS (2048)  LR (0.000175)  PATIENCE (5)  VALIDATE_EVERY (UPDATES/2)
#   TRAIN_LINES  owner data = a seeded sample of N training pairs (default 0: all)
#   TEST_LINES   BLEU on the first N test lines (default 0: all)
#   DP_EPSILON (8)  DELTA (1e-5)  DP_UNIT_CAP (16)
#   DP_ARGS      finetune --dp options of the dp-sgd cell (default none: the default DP
#                recipe of `finetune --dp`, nmtfrag.dp.recipe: LoRA, a public rate of 0.1
#                for 10 expected passes, lr 0.002 — its own budget, not UPDATES), e.g.
#                "--dp-params bias --dp-lr 0.01"
#   ALIGN_PUBLIC  PUBLIC parallel text PREFIX (PREFIX.de, PREFIX.en, untokenised), e.g.
#                the generic corpus: the dp-release cell aligns each pair on its own with
#                a model learned there (required with dp-release: an alignment learned on
#                the owner's data voids the DP guarantee); the model is kept in
#                RUNS/align-model and reused
# Audit (AUDIT=0 skips canaries, exposure and membership inference; reconstruction stays):
#   CANARY_COUNT (3)  CANARY_REPEATS (1,10,25): canaries planted in the owner data
#   SAMPLES (1000) candidates per canary for exposure   MI_PAIRS (1000) pairs per side
# Machine:
#   DEVICE (cpu|cuda; default: cuda if available)   --fp16 (CUDA: mixed precision)
#   ENGINE (fairseq|ctranslate2) decoder for BLEU; default: ctranslate2 on CPU when
#                installed (float32: fairseq's output, 1.6x faster), else fairseq; a
#                rerun keeps the first run's automatic choice
#   COMPUTE_TYPE (ctranslate2: float32)
#   THREADS (torch CPU threads)   FT_ARGS (extra `nmtfrag finetune` options, e.g. --gpus 4)
#   RUNS (runs/compare)   SEED (1)   SAMPLE_RATE (0.5)   BEAM (5)   CHECKPOINT
#   EXTRA_RUNS   YAML run entries appended to the report's runs.yaml
# Output: RUNS/DOMAIN/comparison/{report.md,report.json,privacy_utility.png}, one row per
# cell evaluated in RUNS/DOMAIN (earlier runs' cells included). A step whose
# output dir holds a manifest.json is skipped, so rerunning the command continues; the
# settings are kept in RUNS/DOMAIN/settings (those the script chose marked "automatic",
# and kept by a rerun) and a rerun with other ones is refused.
set -euo pipefail

FP16=()
if [ "${1:-}" = --fp16 ]; then FP16=(--fp16); shift; fi
# shellcheck source=scripts/study_lib.sh
. "$(dirname "$0")/study_lib.sh"
domain_arg "$0" 41 "$@"
check_model_and_data "$D" "$0"

ALL_CELLS="len4 len4-tag len7 len7-tag sent dp-release dp-sgd"
APPROACHES=${APPROACHES:-$ALL_CELLS}
for c in $APPROACHES; do
  [[ " $ALL_CELLS " == *" $c "* ]] || {
    echo "error: APPROACHES: unknown cell '$c' (cells: $ALL_CELLS)" >&2; exit 2; }
done
ALIGN_PUBLIC=${ALIGN_PUBLIC:-}
if [[ " $APPROACHES " == *" dp-release "* ]]; then
  [ -n "$ALIGN_PUBLIC" ] || {
    echo "error: the dp-release cell needs ALIGN_PUBLIC=PREFIX (public parallel text" \
      "PREFIX.de/PREFIX.en for its aligner; an alignment learned on the owner's data" \
      "voids the DP guarantee), or leave dp-release out of APPROACHES" >&2; exit 2; }
  for lang in de en; do
    [ -f "$ALIGN_PUBLIC.$lang" ] || {
      echo "error: ALIGN_PUBLIC: $ALIGN_PUBLIC.$lang not found" >&2; exit 2; }
  done
fi
UPDATES=${UPDATES:-pass}
MAX_TOKENS=${MAX_TOKENS:-2048}
LR=${LR:-0.000175}
PATIENCE=${PATIENCE:-5}
TRAIN_LINES=${TRAIN_LINES:-0}
TEST_LINES=${TEST_LINES:-0}
DP_EPSILON=${DP_EPSILON:-8}
DELTA=${DELTA:-1e-5}
DP_ARGS=${DP_ARGS:-}
DP_UNIT_CAP=${DP_UNIT_CAP:-16}
AUDIT=${AUDIT:-1}
CANARY_COUNT=${CANARY_COUNT:-3}
CANARY_REPEATS=${CANARY_REPEATS:-1,10,25}
SAMPLES=${SAMPLES:-1000}
MI_PAIRS=${MI_PAIRS:-1000}
RUNS=${RUNS:-runs/compare}
SEED=${SEED:-1}
SAMPLE_RATE=${SAMPLE_RATE:-0.5}
BEAM=${BEAM:-5}
FT_ARGS=${FT_ARGS:-}
OUT=$RUNS/$D
mkdir -p "$OUT"
default_engine "$OUT"

# the settings that shape the cells: a rerun must use the same ones, or cells made with
# different owner data or budgets would end up side by side in one report
guard_settings "$OUT" MODEL CHECKPOINT TRAIN_LINES SEED AUDIT CANARY_COUNT CANARY_REPEATS \
  SAMPLE_RATE MAX_TOKENS LR PATIENCE UPDATES DP_EPSILON DELTA DP_ARGS \
  DP_UNIT_CAP TEST_LINES BEAM ENGINE ALIGN_PUBLIC

common_args
has() { [[ " $APPROACHES " == *" $1 "* ]]; }
done_() { [ -f "$1/manifest.json" ]; }
# one progress line per step: the clock, the time since the start, the step and its cell
log() { echo "[compare $D $(date -u +%H:%M:%S) +$(elapsed)] $*" >&2; }
elapsed() { printf '%d:%02d:%02d' $((SECONDS / 3600)) $((SECONDS % 3600 / 60)) $((SECONDS % 60)); }
model_of() { if [ "$1" = baseline ]; then echo "$MODEL"; else echo "$OUT/ft-$1"; fi; }

# evaluate_and_audit CELL: BLEU of the cell's model, then (AUDIT=1) canary exposure and
# membership inference; a step already done is skipped; the report is rewritten after
# a cell is evaluated, so each result is readable as soon as it exists.
evaluate_and_audit() {
  local cfg=$1 m base=() thr=() mdev=() fresh=0
  m=$(model_of "$cfg")
  [ "$cfg" != baseline ] && base=(--baseline "$OUT/eval-baseline")
  if ! done_ "$OUT/eval-$cfg"; then
    log "evaluate $cfg"
    nmtfrag evaluate --model "$m" "${ckpt[@]}" --src "$DATA/test.de" --ref "$DATA/test.en" \
      --pretokenized "${first[@]}" --beam "$BEAM" --name "$cfg" "${base[@]}" \
      --out "$OUT/eval-$cfg" --overwrite "${dev[@]}" "${engine[@]}" "${FP16[@]}" > /dev/null
    fresh=1
  fi
  if [ "$AUDIT" = 1 ]; then
    [ -n "${THREADS:-}" ] && thr=(--threads "$THREADS")
    [ -n "${DEVICE:-}" ] && mdev=(--device "$DEVICE")
    if ! done_ "$OUT/exposure-$cfg"; then
      log "canary exposure $cfg"
      nmtfrag audit exposure --model "$m" "${ckpt[@]}" --canaries "$OUT/canaried/canaries.json" \
        --samples "$SAMPLES" --seed "$SEED" --out "$OUT/exposure-$cfg" --overwrite \
        "${thr[@]}" > /dev/null
      fresh=1
    fi
    if ! done_ "$OUT/mi-$cfg"; then
      log "membership inference $cfg"
      nmtfrag audit membership --model "$m" "${ckpt[@]}" --members "${MEMBERS[@]}" \
        --non-members "$DATA/test.de" "$DATA/test.en" --pretokenized --max-pairs "$MI_PAIRS" \
        --seed "$SEED" --out "$OUT/mi-$cfg" --overwrite "${thr[@]}" "${mdev[@]}" > /dev/null
      fresh=1
    fi
  fi
  if [ "$fresh" = 1 ]; then write_report; fi
}

# write_report: OUT/comparison from every cell evaluated so far (runs.yaml, then
# `nmtfrag audit compare`); one progress line names the cells it holds.
write_report() {
  local budget="$UPDATES updates"
  [ "$UPDATES" = pass ] && budget="the updates of one full-sentence pass"
  python3 -m nmtfrag.audit.runs_yaml --out-dir "$OUT" --approaches "baseline $ALL_CELLS" \
    --title "$D, $(basename "$MODEL"), $budget of $MAX_TOKENS tokens" > "$OUT/runs.yaml.tmp"
  [ -n "${EXTRA_RUNS:-}" ] && cat "$EXTRA_RUNS" >> "$OUT/runs.yaml.tmp"
  mv "$OUT/runs.yaml.tmp" "$OUT/runs.yaml"
  nmtfrag audit compare --runs "$OUT/runs.yaml" --out "$OUT/comparison" --overwrite > /dev/null
  log "report: $(sed -n 's/^- name: //p' "$OUT/runs.yaml" | tr '\n' ' ')->" \
    "$OUT/comparison/report.md"
}

# 1. the owner's data: a seeded sample of the training pairs (TRAIN_LINES), plus canaries
owner_sample "$OUT"
MEMBERS=("$OWN/train.de" "$OWN/train.en")
# layouts that distort the comparison (a target holding its copied source, all caps,
# duplicated pairs, test pairs also in train): warnings before any training
log "data checks (nmtfrag stats --train --test)"
nmtfrag stats --train "$OWN/train.de" "$OWN/train.en" --test "$DATA/test.de" \
  "$DATA/test.en" --warn
if [ "$AUDIT" = 1 ]; then
  if ! done_ "$OUT/canaried"; then
    log "plant canaries ($CANARY_COUNT per repeat count $CANARY_REPEATS, as many unseen)"
    nmtfrag audit canaries insert --src "$OWN/train.de" --tgt "$OWN/train.en" \
      --count "$CANARY_COUNT" --repeats "$CANARY_REPEATS" --seed "$SEED" \
      --out "$OUT/canaried" --overwrite
  fi
  OWN=$OUT/canaried
fi
TRAIN=("$OWN/train.de" "$OWN/train.en")
N_TRAIN=$(wc -l < "$OWN/train.en")

# 2. releases: one eflomal alignment shared by the four sampled releases, so they differ
#    only in max length and tags; the DP release draws its pairs by a DP set union over
#    pairs aligned one by one under a model learned on ALIGN_PUBLIC (cached in RUNS)
align=()
for cfg in len4-tag len4 len7 len7-tag; do
  has "$cfg" || continue
  ml=${cfg#len}; ml=${ml%-tag}
  tag=(); [[ $cfg == *-tag ]] && tag=(--tag)
  reuse=(--keep-alignments); [ ${#align[@]} -gt 0 ] && reuse=("${align[@]}")
  if ! done_ "$OUT/rel-$cfg"; then
    log "release $cfg"
    nmtfrag extract --src "${TRAIN[0]}" --tgt "${TRAIN[1]}" --out "$OUT/rel-$cfg" \
      --max-len "$ml" --sample-rate "$SAMPLE_RATE" "${tag[@]}" --seed "$SEED" \
      --pretokenized "${reuse[@]}" --overwrite
  fi
  [ ${#align[@]} = 0 ] && align=(--alignments "$OUT/rel-$cfg/owner/corpus.align")
done
if has dp-release && ! done_ "$OUT/rel-dp-release"; then
  log "release dp-release (DP set union, ε=$DP_EPSILON, δ=$DELTA)"
  nmtfrag extract --src "${TRAIN[0]}" --tgt "${TRAIN[1]}" --out "$OUT/rel-dp-release" \
    --max-len 4 --tag --dp --epsilon "$DP_EPSILON" --delta "$DELTA" \
    --unit-cap "$DP_UNIT_CAP" --pretokenized --align-public "$ALIGN_PUBLIC" \
    --align-model "$RUNS/align-model" --overwrite
fi
for cfg in $APPROACHES; do
  [ -d "$OUT/rel-$cfg" ] || continue
  if ! done_ "$OUT/reconstruct-$cfg"; then
    log "reconstruction attack on release $cfg"
    nmtfrag audit reconstruct --release "$OUT/rel-$cfg" --src "${TRAIN[0]}" \
      --tgt "${TRAIN[1]}" --mode both --out "$OUT/reconstruct-$cfg" --overwrite
  fi
done

# 3. models: one budget for every cell; each cell is evaluated and audited as soon as its
#    model is ready, and the report is rewritten after each (a partial one until the end)
ft_common=(--valid-src "$DATA/valid.de" --valid-tgt "$DATA/valid.en" --pretokenized
           --max-tokens "$MAX_TOKENS" --seed "$SEED"
           --overwrite -q "${ckpt[@]}" "${dev[@]}" "${FP16[@]}")
nonprivate=(--lr "$LR" --patience "$PATIENCE")  # the method's own options (--dp refuses them)
evaluate_and_audit baseline
if [ "$UPDATES" = pass ]; then
  # the budget is one pass of the full-sentence cell: train it first, read its count
  if ! done_ "$OUT/ft-sent"; then
    log "fine-tune sent (one pass over $N_TRAIN pairs: sets the budget)"
    # shellcheck disable=SC2086
    nmtfrag finetune --model "$MODEL" --train "${TRAIN[@]}" --out "$OUT/ft-sent" \
      --max-epochs 1 "${nonprivate[@]}" "${ft_common[@]}" $FT_ARGS > /dev/null
  fi
  UPDATES=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["result"]["num_updates"])' \
    "$OUT/ft-sent/manifest.json")
  log "budget: $UPDATES updates of at most $MAX_TOKENS tokens per cell"
  has sent && evaluate_and_audit sent
fi
VALIDATE_EVERY=${VALIDATE_EVERY:-$(( UPDATES / 2 > 0 ? UPDATES / 2 : 1 ))}
for cfg in $APPROACHES; do
  if ! done_ "$OUT/ft-$cfg"; then
    log "fine-tune $cfg"
    case $cfg in
      sent) train=("${TRAIN[@]}") ;;
      dp-sgd) train=() ;;
      *) train=("$OUT/rel-$cfg") ;;
    esac
    if [ "$cfg" = dp-sgd ]; then
      # the default DP recipe (nmtfrag.dp.recipe) unless DP_ARGS says otherwise
      # shellcheck disable=SC2086
      nmtfrag finetune --model "$MODEL" --train "${TRAIN[@]}" --out "$OUT/ft-dp-sgd" \
        --dp --epsilon "$DP_EPSILON" --delta "$DELTA" "${ft_common[@]}" $DP_ARGS \
        $FT_ARGS > /dev/null
    else
      # shellcheck disable=SC2086
      nmtfrag finetune --model "$MODEL" --train "${train[@]}" --out "$OUT/ft-$cfg" \
        --max-updates "$UPDATES" --validate-every "$VALIDATE_EVERY" "${nonprivate[@]}" \
        "${ft_common[@]}" $FT_ARGS > /dev/null
    fi
  fi
  evaluate_and_audit "$cfg"
done

# 4. the final report, of every cell evaluated in OUT (also those of an earlier run with
#    other APPROACHES: the settings check keeps them comparable)
write_report
cat "$OUT/comparison/report.md"
log "done: $OUT/comparison/report.md"
