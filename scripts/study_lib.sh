# Shared by the study scripts (scripts/compare.sh, scripts/dp_recipe.sh): the checks of
# MODEL and DATA_ROOT, the settings guard, the BLEU decoder and the owner's data sample.
# Sourced, not run; each function exits 2 with an `error:` line on bad input.

# domain_arg SCRIPT LAST_HELP_LINE ARGS...: D is the one argument (a DOMAIN); anything
# else prints the script's header comment (lines 2..LAST_HELP_LINE) and exits 2.
domain_arg() {
  local script=$1 last=$2; shift 2
  if [ $# -ne 1 ] || [[ $1 == -* ]]; then
    sed -n "2,${last}p" "$script" | sed 's/^# \{0,1\}//'
    exit 2
  fi
  D=$1
}

# check_model_and_data DOMAIN SCRIPT: MODEL and DATA_ROOT/DOMAIN/{train,valid,test}.{de,en}
# must exist; sets DATA.
check_model_and_data() {
  if [ -z "${MODEL:-}" ] || [ -z "${DATA_ROOT:-}" ]; then
    echo "error: set MODEL (a WMT19-layout model dir) and DATA_ROOT (parent of $1/), e.g." >&2
    echo "  MODEL=../shared/models/generic-deen-medium DATA_ROOT=../shared/data/indomain $2 $1" >&2
    exit 2
  fi
  DATA=$DATA_ROOT/$1
  local f l
  for f in train valid test; do for l in de en; do
    [ -f "$DATA/$f.$l" ] || { echo "error: $DATA/$f.$l: no such file" >&2; exit 2; }
  done; done
  [ -f "$MODEL/dict.de.txt" ] || {
    echo "error: $MODEL is not a WMT19-layout model dir (no dict.de.txt)" >&2; exit 2; }
}

# guard_settings OUT VAR...: the first run keeps the variables' values in OUT/settings
# (those named in AUTO_SETTINGS marked "(automatic)": the script chose them, not the user);
# a later run with other values is refused, naming the values that would continue it.
guard_settings() {
  local out=$1 v settings recorded; shift
  settings=$(for v in "$@"; do echo "$v=${!v:-}"; done)
  if [ -f "$out/settings" ]; then
    recorded=$(sed 's/ (automatic)$//' "$out/settings")
    if ! diff -q <(echo "$settings") <(echo "$recorded") > /dev/null; then
      echo "error: $out was made with other settings; set the earlier values to continue it" \
        "(or use another RUNS):" >&2
      { diff <(echo "$settings") "$out/settings" || true; } |
        sed -n 's/^< /  now:    /p; s/^> /  before: /p' >&2
      echo "  to continue: $(diff <(echo "$settings") <(echo "$recorded") |
        sed -n 's/^> //p' | tr '\n' ' ')" >&2
      exit 2
    fi
  else
    for v in "$@"; do
      if [[ " ${AUTO_SETTINGS:-} " == *" $v "* ]]; then echo "$v=${!v:-} (automatic)"
      else echo "$v=${!v:-}"; fi
    done > "$out/settings"
  fi
}

# recorded_setting OUT VAR: VAR's value in OUT/settings (empty if none is recorded).
recorded_setting() {
  [ -f "$1/settings" ] || return 0
  sed -n "s/^$2=\(.*\)/\1/p" "$1/settings" | sed 's/ (automatic)$//'
}

# default_engine OUT: ENGINE, if unset, is the one OUT/settings records (a rerun keeps the
# first run's choice even if what is installed changed since), else ctranslate2 on CPU
# when it is installed (float32: fairseq's output, faster), else fairseq; an ENGINE chosen
# here is added to AUTO_SETTINGS (recorded as chosen automatically).
default_engine() {
  [ -n "${ENGINE:-}" ] && return 0
  AUTO_SETTINGS="${AUTO_SETTINGS:-} ENGINE"
  ENGINE=$(recorded_setting "$1" ENGINE)
  if [ -n "$ENGINE" ]; then
    if [ "$ENGINE" = ctranslate2 ] && ! python3 -c "import ctranslate2" 2> /dev/null; then
      echo "error: $1 was evaluated with ENGINE=ctranslate2 (chosen automatically), which" \
        "cannot be imported now: install ctranslate2 to continue (or use another RUNS)" >&2
      exit 2
    fi
    return 0
  fi
  ENGINE=fairseq
  if [ "${DEVICE:-}" != cuda ] && python3 -c "import ctranslate2, torch, sys
sys.exit('${DEVICE:-}' != 'cpu' and torch.cuda.is_available())" 2> /dev/null; then
    ENGINE=ctranslate2
  fi
}

# owner_sample OUT: OWN is DATA, or with TRAIN_LINES a seeded sample of that many training
# pairs in OUT/sample (SEED).
owner_sample() {
  OWN=$DATA
  if [ "${TRAIN_LINES:-0}" != 0 ]; then
    OWN=$1/sample
    if [ ! -f "$OWN/manifest.json" ]; then
      log "owner data: a sample of $TRAIN_LINES training pairs (seed $SEED)"
      python3 -m nmtfrag.corpus_sample --src "$DATA/train.de" --tgt "$DATA/train.en" \
        --lines "$TRAIN_LINES" --seed "$SEED" --out "$OWN"
    fi
  fi
}

# common_args: the option arrays every step passes on — dev (DEVICE, THREADS), ckpt
# (CHECKPOINT), first (TEST_LINES), engine (ENGINE; CTranslate2 conversions are cached
# in RUNS, not in MODEL, which may be read-only).
common_args() {
  dev=(); ckpt=(); first=()
  [ -n "${DEVICE:-}" ] && dev+=(--device "$DEVICE")
  [ -n "${THREADS:-}" ] && dev+=(--threads "$THREADS")
  [ -n "${CHECKPOINT:-}" ] && ckpt+=(--checkpoint "$CHECKPOINT")
  [ "${TEST_LINES:-0}" != 0 ] && first+=(--first "$TEST_LINES")
  engine=(--engine "$ENGINE")
  if [ "$ENGINE" = ctranslate2 ]; then
    engine+=(--compute-type "${COMPUTE_TYPE:-float32}" --ct2-cache "$RUNS/ct2-cache")
  fi
}
