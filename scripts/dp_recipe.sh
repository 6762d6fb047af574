#!/usr/bin/env bash
# A DP fine-tuning study for one domain: non-private and DP-SGD cells trained for the same
# number of passes over the owner's full sentences, evaluated on one test set, in one
# table — BLEU (paired bootstrap against the baseline), the share of the non-private
# gain each cell keeps, ε (RDP and PRV), σ, mean gradient SNR and clipped share. The
# README's DP recipe comes from runs of this script.
#
# usage: scripts/dp_recipe.sh DOMAIN          e.g. scripts/dp_recipe.sh EMEA
#
# Required (environment):
#   MODEL        WMT19-layout model dir      DATA_ROOT  parent of DOMAIN/{train,valid,test}.*
# Cells:
#   CELLS        file, one cell a line: a NAME, then its `nmtfrag finetune` options
#                (default: the grid below). Each cell trains for PASSES passes
#                (--max-epochs; a DP cell takes that many expected passes of Poisson
#                batches of its --logical-batch, or ceil(PASSES/Q) steps at its
#                --sample-rate Q). The cell `nonprivate-all` is the
#                reference the shares of gain are of (REFERENCE to pick another).
#                Cells may use any finetune --dp option: --max-epochs via PASSES, a logical
#                batch up to the whole data, --dp-warmup-steps, --dp-clip-mode normalize,
#                --dp-loss mean, --dp-control (σ = 0, not private; ε column "control";
#                under SIMULATE it runs the planned steps on batches of B_SIM),
#                --dp-simulate-batch B_SIM (not private; ε column "sim").
#                A cell with --release-epsilon E is the other formal-guarantee option: a DP
#                set-union phrase release of the owner's sentences (`extract --dp`, max-len
#                4, <P> tags, unit cap 16, ε = E, δ = DELTA, secret randomness;
#                RELEASE_ARGS adds extract options), then non-private fine-tuning of all
#                parameters on the release with the cell's other options (the reference's
#                early stopping, say). Needs ALIGN_PUBLIC.
#   ALIGN_PUBLIC PREFIX of PUBLIC parallel text (PREFIX.de, PREFIX.en) for release cells:
#                each pair is aligned on its own with a model learned there, cached in
#                RUNS/align-model (an alignment learned on the owner's corpus would void
#                the release's guarantee). With it, the default grid adds release cells
#                at ε 8 and 1.
#   SIMULATE     B_SIM: a cheap sweep (Sander et al. 2023). Every DP cell of CELLS runs
#                as the simulation sim-NAME (--dp-simulate-batch B_SIM added): the planned
#                run's noise per averaged gradient and steps on batches of B_SIM, at about
#                B_SIM/B of its compute. Sweep lr, clipping, batch, epochs, trained set
#                this way, then run the chosen cells privately without SIMULATE: both
#                land in the same table.
#   PASSES (10)  TEST_LINES (500; 0 = all)  TRAIN_LINES (0 = all; else a seeded sample)
#   DELTA (1e-5)  MAX_TOKENS (2048)  SEED (1)  RUNS (runs/dp-recipe)
# Machine: DEVICE (cpu|cuda)  THREADS  ENGINE (as scripts/compare.sh)  FT_ARGS
# Output: RUNS/DOMAIN/{ft-NAME,eval-NAME,rel-NAME}, RUNS/DOMAIN/table.md (every cell
# run so far in RUNS/DOMAIN, rewritten after each evaluated cell). A cell whose directory
# holds a manifest.json is skipped, so rerunning continues, and a run with other CELLS
# adds its cells (two runs with disjoint CELLS may go side by side, one CPU core each);
# the settings are kept in RUNS/DOMAIN/settings and a rerun with other ones is refused. A
# cell killed mid-run continues when the script is run again: a DP cell from its last
# saved state, a non-private one from its last epoch's checkpoint (finetune --resume).
set -euo pipefail

# shellcheck source=scripts/study_lib.sh
. "$(dirname "$0")/study_lib.sh"
domain_arg "$0" 50 "$@"
check_model_and_data "$D" "$0"

PASSES=${PASSES:-10}
TEST_LINES=${TEST_LINES:-500}
TRAIN_LINES=${TRAIN_LINES:-0}
DELTA=${DELTA:-1e-5}
MAX_TOKENS=${MAX_TOKENS:-2048}
SEED=${SEED:-1}
RUNS=${RUNS:-runs/dp-recipe}
REFERENCE=${REFERENCE:-nonprivate-all}
FT_ARGS=${FT_ARGS:-}
RELEASE_ARGS=${RELEASE_ARGS:-}
OUT=$RUNS/$D
mkdir -p "$OUT"
# one progress line per step: the clock, the time since the start, the step and its cell
log() { echo "[dp-recipe $D $(date -u +%H:%M:%S) +$(elapsed)] $*" >&2; }
elapsed() { printf '%d:%02d:%02d' $((SECONDS / 3600)) $((SECONDS % 3600 / 60)) $((SECONDS % 60)); }
done_() { [ -f "$1/manifest.json" ]; }

default_engine "$OUT"
guard_settings "$OUT" MODEL CHECKPOINT PASSES TEST_LINES TRAIN_LINES DELTA MAX_TOKENS SEED \
  ENGINE

# the cells (default: the study behind the README's recipe table): the early-stopped
# non-private reference; the recipe (LoRA, lr 0.002, 10 expected passes of batches of
# 1,000; finetune --dp's default is written as --sample-rate 0.1, nearly this schedule
# at n = 10k: 100 steps composed by RDP instead of 102 by basic composition) and biases (lr 0.01: Adam under heavy noise moves each coordinate by about
# lr per step whatever the signal, so the few bias values take a larger rate) at ε 8 and
# 1; and the noise-free control of the recipe (σ = 0, not private)
RUN_CELLS=$(mktemp "$OUT/.cells.XXXXXX")
cleanup() { rm -f "$RUN_CELLS"; }
trap cleanup EXIT
if [ -n "${CELLS:-}" ]; then
  [ -f "$CELLS" ] || { echo "error: CELLS: no file $CELLS" >&2; exit 2; }
  grep -v '^[[:space:]]*\(#\|$\)' "$CELLS" > "$RUN_CELLS" || true
else
  cat > "$RUN_CELLS" <<EOF
nonprivate-all        --lr 0.000175 --patience 2
dp8-lora-10ep         --dp --target-epsilon 8 --dp-params lora --dp-lr 0.002 --logical-batch 1000 --max-grad-norm 1
dp1-lora-10ep         --dp --target-epsilon 1 --dp-params lora --dp-lr 0.002 --logical-batch 1000 --max-grad-norm 1
dp8-bias-10ep         --dp --target-epsilon 8 --dp-params bias --dp-lr 0.01 --logical-batch 1000 --max-grad-norm 1
dp1-bias-10ep         --dp --target-epsilon 1 --dp-params bias --dp-lr 0.01 --logical-batch 1000 --max-grad-norm 1
control-dp8-lora-10ep --dp --target-epsilon 8 --dp-params lora --dp-lr 0.002 --logical-batch 1000 --max-grad-norm 1 --dp-control
EOF
  if [ -n "${ALIGN_PUBLIC:-}" ]; then  # the DP set-union release, trained as the reference
    cat >> "$RUN_CELLS" <<EOF
release8-len4-tag     --release-epsilon 8 --lr 0.000175 --patience 2
release1-len4-tag     --release-epsilon 1 --lr 0.000175 --patience 2
EOF
  fi
fi
# release cells: the public text is needed before anything trains
if grep -q -- '--release-epsilon' "$RUN_CELLS"; then
  if [ -z "${ALIGN_PUBLIC:-}" ] || [ ! -f "$ALIGN_PUBLIC.de" ] || [ ! -f "$ALIGN_PUBLIC.en" ]; then
    echo "error: a --release-epsilon cell needs ALIGN_PUBLIC=PREFIX, public parallel text" \
      "PREFIX.de and PREFIX.en (an alignment learned on the owner's corpus voids the" \
      "release's guarantee)" >&2
    exit 2
  fi
  # one awk pass (no pipe whose first half SIGPIPE could cut short under pipefail)
  if awk -v ft=" $FT_ARGS " '/--release-epsilon/ && (" " $0 " " ft) ~ /[ \t]--dp[ \t]/ { bad = 1 }
                              END { exit !bad }' "$RUN_CELLS"; then
    echo "error: a --release-epsilon cell trains on the release without DP-SGD: drop --dp" \
      "(from the cell or FT_ARGS)" >&2
    exit 2
  fi
  if grep -Eq -- '--release-epsilon(=|[[:space:]]*$)' "$RUN_CELLS"; then
    echo "error: write a release cell's ε as '--release-epsilon E' (a space, then E)" >&2
    exit 2
  fi
fi
if [ -n "${SIMULATE:-}" ]; then  # the sweep: DP cells become their simulations
  [[ "$SIMULATE" =~ ^[1-9][0-9]*$ ]] || { echo "error: SIMULATE must be a batch size" >&2; exit 2; }
  awk -v b="$SIMULATE" '(" " $0 " ") ~ / --dp / { $1 = "sim-" $1; $0 = $0 " --dp-simulate-batch " b }
                        { print }' "$RUN_CELLS" > "$RUN_CELLS.sim"
  mv "$RUN_CELLS.sim" "$RUN_CELLS"
fi
# a cell keeps its options: the same name with other options is refused
exec 4> "$OUT/.cells.lock"
flock 4  # one run at a time updates RUNS/DOMAIN/cells
if [ -f "$OUT/cells" ]; then
  while read -r name opts; do
    old=$(awk -v n="$name" '$1 == n { $1 = ""; sub(/^ +/, ""); print }' "$OUT/cells")
    opts=$(echo "$opts" | tr -s ' \t' ' ')
    if [ -n "$old" ] && [ "$old" != "$opts" ]; then
      echo "error: cell $name was run with '$old', now '$opts': rename it" >&2; exit 2
    fi
  done < "$RUN_CELLS"
fi
python3 - "$OUT/cells" "$RUN_CELLS" <<'EOF'
import sys
old_path, new_path = sys.argv[1:]
try:
    old = [l.rstrip("\n") for l in open(old_path, encoding="utf-8")]
except FileNotFoundError:
    old = []
names = {l.split()[0] for l in old}
new = [" ".join(l.split()) for l in open(new_path, encoding="utf-8") if l.strip()]
with open(old_path, "w", encoding="utf-8") as f:
    f.writelines(l + "\n" for l in old + [l for l in new if l.split()[0] not in names])
EOF
flock -u 4

common_args

owner_sample "$OUT"

evaluate() {  # NAME MODEL_DIR [--baseline DIR]
  local name=$1 m=$2; shift 2
  done_ "$OUT/eval-$name" && return 0
  log "evaluate $name"
  nmtfrag evaluate --model "$m" "${ckpt[@]}" --src "$DATA/test.de" --ref "$DATA/test.en" \
    --pretokenized "${first[@]}" --name "$name" "$@" --out "$OUT/eval-$name" --overwrite \
    "${dev[@]}" "${engine[@]}" > /dev/null
}
# write_table: RUNS/DOMAIN/table.md of every cell evaluated so far (rewritten after each
# cell, so a result is readable as soon as it exists; one run at a time writes it)
write_table() {
  flock 4
  python3 -m nmtfrag.dp.study_table "$OUT" --reference "$REFERENCE" > "$OUT/table.md.tmp"
  mv "$OUT/table.md.tmp" "$OUT/table.md"
  flock -u 4
  log "table: $(( $(grep -c '^| ' "$OUT/table.md") - 1 )) cells -> $OUT/table.md"
}
flock 4; evaluate baseline "$MODEL"; flock -u 4


while read -r -u 3 name opts; do
  opts=$(echo "$opts" | tr -s ' \t' ' ')
  # a cell's lock is held by the kernel (flock), so a killed run leaves no stale lock
  [ -d "$OUT/.lock-$name" ] && rmdir "$OUT/.lock-$name"  # the lock of older versions
  exec 5> "$OUT/.lock-$name"
  if ! flock -n 5; then
    echo "error: cell $name is being run by another dp_recipe.sh" >&2
    exit 2
  fi
  train=("$OWN/train.de" "$OWN/train.en")
  if [[ " $opts " =~ \ --release-epsilon\ ([^ ]+)\  ]]; then  # a DP set-union release cell
    eps=${BASH_REMATCH[1]}
    opts=$(echo " $opts " | sed "s/ --release-epsilon [^ ]* / /; s/^ *//; s/ *$//")
    train=("$OUT/rel-$name")
    if ! done_ "$OUT/rel-$name"; then
      log "release $name (DP set union, ε=$eps, δ=$DELTA)"
      # shellcheck disable=SC2086
      nmtfrag extract --src "$OWN/train.de" --tgt "$OWN/train.en" --out "$OUT/rel-$name" \
        --max-len 4 --tag --dp --epsilon "$eps" --delta "$DELTA" --pretokenized \
        --align-public "$ALIGN_PUBLIC" --align-model "$RUNS/align-model" --overwrite \
        $RELEASE_ARGS > /dev/null
    fi
  fi
  if ! done_ "$OUT/ft-$name"; then
    log "fine-tune $name: $opts"
    dp=(); [[ " $opts " == *" --dp "* ]] && dp=(--delta "$DELTA")
    again=(--overwrite)  # a killed DP cell continues where it stopped
    if [ -f "$OUT/ft-$name/owner/dp-state.pt" ] ||
       [ -f "$OUT/ft-$name/checkpoints/checkpoint_last.pt" ]; then
      again=(--resume); log "resume $name"
    fi
    # shellcheck disable=SC2086
    nmtfrag finetune --model "$MODEL" "${ckpt[@]}" --train "${train[@]}" \
      --valid-src "$DATA/valid.de" --valid-tgt "$DATA/valid.en" --pretokenized \
      --out "$OUT/ft-$name" "${again[@]}" --max-epochs "$PASSES" --max-tokens "$MAX_TOKENS" \
      "${dp[@]}" --seed "$SEED" -q "${dev[@]}" $opts $FT_ARGS > /dev/null
  fi
  if ! done_ "$OUT/eval-$name"; then
    evaluate "$name" "$OUT/ft-$name" --baseline "$OUT/eval-baseline"
    write_table
  fi
  exec 5>&-  # the cell is done: release its lock
done 3< "$RUN_CELLS"

write_table
cat "$OUT/table.md"
