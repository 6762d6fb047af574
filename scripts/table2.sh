#!/usr/bin/env bash
# Reproduce the grid of Kim, Bisazza & Turkmen (2021), Table 2, for one or more domains:
#   baseline (no fine-tuning), fine-tuning on phrase pairs of max length 4 and 7, each
#   without and with <P> … </P> tags, and fine-tuning on the full sentences;
#   SacreBLEU on the test set; one Markdown table in the paper's shape.
#
# usage: scripts/table2.sh DOMAIN [DOMAIN …]        e.g. scripts/table2.sh EMEA GNOME
#
# Parameters (environment variables; MODEL and DATA_ROOT are required):
#   MODEL        model dir in the WMT19 layout   (e.g. ../shared/models/generic-deen-medium;
#                the real one: wmt19.de-en/ with CHECKPOINT=model1.pt, DEVICE=cuda)
#   CHECKPOINT   checkpoint in MODEL to start from (default: model.pt, else model1.pt)
#   DATA_ROOT    parent of DOMAIN/{train,valid,test}.{de,en}  (e.g. ../shared/data/indomain)
#   PRETOKENIZED 1 if the data is Moses-tokenised (default 1, as ../shared/data/indomain)
#   RUNS         where every output goes                      (runs/table2)
#   UPDATES      update budget of every fine-tuning cell       (24)
#   MAX_TOKENS   tokens per batch                               (2048)
#   VALIDATE_EVERY validation/checkpoint interval in updates    (UPDATES/2)
#   PATIENCE     early-stopping patience in validations         (5)
#   TEST_LINES   evaluate on the first N test lines (0 = all)   (0)
#   BEAM (5)  SAMPLE_RATE (0.5)  SEED (1)  DEVICE (cpu|cuda, default: auto)
#   THREADS      torch CPU threads (default: torch's choice)
#   FT_ARGS      extra `nmtfrag finetune` options, e.g. "--gpus 4 --fp16"
# Finished steps (an output dir with manifest.json) are skipped, so a rerun continues.
set -euo pipefail

if [ $# -lt 1 ]; then
  sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi

if [ -z "${MODEL:-}" ] || [ -z "${DATA_ROOT:-}" ]; then
  echo "error: set MODEL (a WMT19-layout model dir) and DATA_ROOT (parent of DOMAIN/), e.g." >&2
  echo "  MODEL=../shared/models/generic-deen-medium DATA_ROOT=../shared/data/indomain $0 $*" >&2
  exit 2
fi
RUNS=${RUNS:-runs/table2}
UPDATES=${UPDATES:-24}
MAX_TOKENS=${MAX_TOKENS:-2048}
VALIDATE_EVERY=${VALIDATE_EVERY:-$(( UPDATES / 2 > 0 ? UPDATES / 2 : 1 ))}
PATIENCE=${PATIENCE:-5}
TEST_LINES=${TEST_LINES:-0}
BEAM=${BEAM:-5}
SAMPLE_RATE=${SAMPLE_RATE:-0.5}
SEED=${SEED:-1}
PRETOKENIZED=${PRETOKENIZED:-1}
FT_ARGS=${FT_ARGS:-}

common_dev=()
[ -n "${DEVICE:-}" ] && common_dev+=(--device "$DEVICE")
[ -n "${THREADS:-}" ] && common_dev+=(--threads "$THREADS")
ckpt=()
[ -n "${CHECKPOINT:-}" ] && ckpt+=(--checkpoint "$CHECKPOINT")
pretok=()
[ "$PRETOKENIZED" = 1 ] && pretok+=(--pretokenized)
tok=()
[ "$PRETOKENIZED" = 1 ] && tok+=(--tokenized)
first=()
[ "$TEST_LINES" != 0 ] && first+=(--first "$TEST_LINES")

log() { echo "[table2 $(date -u +%H:%M:%S)] $*" >&2; }
done_() { [ -f "$1/manifest.json" ]; }

run_domain() {
  local D=$1 data=$DATA_ROOT/$1 out=$RUNS/$1
  mkdir -p "$out"
  for f in train valid test; do
    for l in de en; do
      [ -f "$data/$f.$l" ] || { echo "error: $data/$f.$l: no such file" >&2; exit 2; }
    done
  done

  # 1. releases: one alignment (eflomal) reused for all four, so they differ only in
  #    max length and tags
  local first_rel=$out/rel-len4-tag
  if ! done_ "$first_rel"; then
    log "$D: extract max-len 4 + tags (aligning with eflomal)"
    nmtfrag extract --src "$data/train.de" --tgt "$data/train.en" --out "$first_rel" \
      --max-len 4 --sample-rate "$SAMPLE_RATE" --tag --seed "$SEED" "${pretok[@]}" \
      --keep-alignments --overwrite
  fi
  for cfg in len4 len7 len7-tag; do
    local ml=${cfg#len}; ml=${ml%-tag}
    local tagopt=(); [[ $cfg == *-tag ]] && tagopt=(--tag)
    if ! done_ "$out/rel-$cfg"; then
      log "$D: extract $cfg"
      nmtfrag extract --src "$data/train.de" --tgt "$data/train.en" --out "$out/rel-$cfg" \
        --max-len "$ml" --sample-rate "$SAMPLE_RATE" "${tagopt[@]}" --seed "$SEED" \
        "${pretok[@]}" --alignments "$first_rel/owner/corpus.align" --overwrite
    fi
  done

  # 2. baseline
  if ! done_ "$out/eval-baseline"; then
    log "$D: evaluate baseline"
    nmtfrag evaluate --model "$MODEL" "${ckpt[@]}" --src "$data/test.de" \
      --ref "$data/test.en" "${tok[@]}" "${first[@]}" --beam "$BEAM" --plot \
      --name baseline --out "$out/eval-baseline" --overwrite "${common_dev[@]}"
  fi

  # 3. fine-tuning cells
  for cfg in len4 len4-tag len7 len7-tag sent; do
    local train
    if [ "$cfg" = sent ]; then train=("$data/train.de" "$data/train.en");
    else train=("$out/rel-$cfg"); fi
    if ! done_ "$out/ft-$cfg"; then
      log "$D: fine-tune $cfg ($UPDATES updates)"
      # shellcheck disable=SC2086
      nmtfrag finetune --model "$MODEL" "${ckpt[@]}" --train "${train[@]}" \
        --valid-src "$data/valid.de" --valid-tgt "$data/valid.en" "${pretok[@]}" \
        --out "$out/ft-$cfg" --max-updates "$UPDATES" --max-tokens "$MAX_TOKENS" \
        --validate-every "$VALIDATE_EVERY" --patience "$PATIENCE" --seed "$SEED" \
        --overwrite -q "${common_dev[@]}" $FT_ARGS
    fi
    if ! done_ "$out/eval-$cfg"; then
      log "$D: evaluate $cfg"
      nmtfrag evaluate --model "$out/ft-$cfg" --src "$data/test.de" --ref "$data/test.en" \
        "${tok[@]}" "${first[@]}" --beam "$BEAM" --plot --name "$cfg" \
        --baseline "$out/eval-baseline" --out "$out/eval-$cfg" --overwrite \
        "${common_dev[@]}"
    fi
  done
}

for D in "$@"; do run_domain "$D"; done

# 4. the table (also written to $RUNS/table2.md)
python3 - "$RUNS" "$UPDATES" "$MAX_TOKENS" "$@" <<'EOF'
import json, os, sys
runs, updates, max_tokens, domains = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
rows = [("baseline", "Baseline (no fine-tuning)"),
        ("len4", "Phrases, max length 4"), ("len4-tag", "Phrases, max length 4, tagged"),
        ("len7", "Phrases, max length 7"), ("len7-tag", "Phrases, max length 7, tagged"),
        ("sent", "Full sentences")]
def rep(d, cfg):
    p = os.path.join(runs, d, f"eval-{cfg}", "report.json")
    return json.load(open(p)) if os.path.exists(p) else None
def ft(d, cfg):
    p = os.path.join(runs, d, f"ft-{cfg}", "manifest.json")
    return json.load(open(p)) if os.path.exists(p) else None
def rel(d, cfg):
    p = os.path.join(runs, d, f"rel-{cfg}", "manifest.json")
    return json.load(open(p)) if os.path.exists(p) else None
out = ["| System | " + " | ".join(f"{d} BLEU | {d} chrF | {d} len (out/ref)" for d in domains) + " |",
       "|---|" + "---:|---:|---:|" * len(domains)]
for cfg, name in rows:
    cells = []
    for d in domains:
        r = rep(d, cfg)
        if r is None:
            cells += ["–", "–", "–"]; continue
        s = r["scores"]; sig = s.get("significance", {}).get("BLEU")
        mark = "" if not sig else ("*" if sig["significant_at_0.05"] else "")
        cells += [f"{s['bleu']:.2f}{mark}", f"{s['chrf']:.1f}",
                  f"{s['avg_output_tokens']:.1f}/{s['avg_reference_tokens']:.1f}"]
    out.append(f"| {name} | " + " | ".join(cells) + " |")
notes = []
for d in domains:
    b = rep(d, "baseline")
    if b:
        notes.append(f"- {d}: {b['scores']['sentences']} test sentences; {b['reference_handling']}; "
                     f"`{b['scores']['bleu_signature']}`")
    for cfg, name in rows[1:]:
        f, rl = ft(d, cfg), rel(d, cfg) if cfg != "sent" else None
        if f:
            r = f["result"]
            extra = ""
            if rl:
                extra = f", release of {rl['counts'].get('occurrences_released')} phrase pairs"
            notes.append(f"- {d} {cfg}: {r['num_updates']} updates (best at {r['best_checkpoint_updates']}), "
                         f"valid loss {r['valid_loss_before']} → {r['valid_loss_best']}{extra}, "
                         f"{f['counts']['train']['pairs']} training lines")
text = "\n".join(out) + "\n\n" + \
    f"Fine-tuning budget: {updates} updates of at most {max_tokens} tokens per cell; " \
    "`*` = BLEU differs from the baseline at p < 0.05 (paired bootstrap, 1000 samples).\n" + \
    "\n".join(notes) + "\n"
with open(os.path.join(runs, "table2.md" if len(domains) > 1 else f"table2-{domains[0]}.md"), "w") as fh:
    fh.write(text)
print(text)
EOF
