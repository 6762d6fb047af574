#!/usr/bin/env bash
# Reproduce the grid of Kim, Bisazza & Turkmen (2021), Table 2, for one or more domains:
#   baseline (no fine-tuning), fine-tuning on phrase pairs of max length 4 and 7, each
#   without and with <P> … </P> tags, and fine-tuning on the full sentences;
#   SacreBLEU on the test set; one Markdown table in the paper's shape.
#
# usage: scripts/table2.sh DOMAIN [DOMAIN …]        e.g. scripts/table2.sh EMEA GNOME
#
# Each domain is one run of scripts/compare.sh with the Table-2 cells only
# (APPROACHES="len4 len4-tag len7 len7-tag sent", AUDIT=0: no canaries planted); it takes
# the same environment variables (MODEL and DATA_ROOT required; UPDATES, MAX_TOKENS,
# TRAIN_LINES, TEST_LINES, DEVICE, ENGINE, …: see `scripts/compare.sh`), except RUNS,
# which defaults to runs/table2. The table also goes to RUNS/table2.md. Finished steps
# are skipped, so a rerun continues (and a RUNS that compare.sh filled is just read).
set -euo pipefail

if [ $# -lt 1 ]; then
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
if [ -z "${MODEL:-}" ] || [ -z "${DATA_ROOT:-}" ]; then
  echo "error: set MODEL (a WMT19-layout model dir) and DATA_ROOT (parent of DOMAIN/), e.g." >&2
  echo "  MODEL=../shared/models/generic-deen-medium DATA_ROOT=../shared/data/indomain $0 $*" >&2
  exit 2
fi
export RUNS=${RUNS:-runs/table2}
export APPROACHES="len4 len4-tag len7 len7-tag sent"
for D in "$@"; do
  # a domain compare.sh already ran keeps its AUDIT (with canaries or not); else none
  audit=$(sed -n 's/^AUDIT=//p' "$RUNS/$D/settings" 2>/dev/null || true)
  AUDIT=${audit:-${AUDIT:-0}} bash "$(dirname "$0")/compare.sh" "$D" > /dev/null
done

# 4. the table (also written to $RUNS/table2.md)
python3 - "$RUNS" "$@" <<'EOF'
import json, os, sys
runs, domains = sys.argv[1], sys.argv[2:]
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
    "Every fine-tuning cell of a domain has the same update budget (below); " \
    "`*` = BLEU differs from the baseline at p < 0.05 (paired bootstrap, 1000 samples).\n" + \
    "\n".join(notes) + "\n"
with open(os.path.join(runs, "table2.md" if len(domains) > 1 else f"table2-{domains[0]}.md"), "w") as fh:
    fh.write(text)
print(text)
EOF
