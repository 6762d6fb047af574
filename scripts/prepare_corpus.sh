#!/usr/bin/env bash
# Build a document-level benchmark split (Kim, Bisazza & Turkmen 2021) from an OPUS download.
#
#   scripts/prepare_corpus.sh DOMAIN OPUS_DIR OUTDIR [nmtfrag split options...]
#
# DOMAIN names a recipe, corpora/DOMAIN/recipe (EMEA, GNOME, JRC-Acquis): which OPUS
# release and files, how documents are identified, target sizes, seed, licence.
# OPUS_DIR holds the recipe's Moses download (the .txt.zip as downloaded, or its files
# unpacked). Nothing is downloaded: if the files are missing the script exits 2 naming
# what to fetch and from where. Steps:
#   1. nmtfrag opus2tsv  OPUS files -> OUTDIR/docs.tsv (doc_id<TAB>de<TAB>en)
#   2. nmtfrag split     docs.tsv -> OUTDIR/{train,valid,test}.{de,en}, documents.tsv,
#                        manifest.json (sizes from the recipe; extra options given after
#                        OUTDIR override them, e.g. --seed 2 or --train all)
#   3. nmtfrag stats     OUTDIR/stats/report.md and report.json (Table 1 figures)
# Exit codes: 0 done, 2 bad usage or missing/bad input, 1 internal failure.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
known="$(cd "$root/corpora" && for d in */; do if [ -f "$d/recipe" ]; then printf '%s ' "${d%/}"; fi; done)"

if [ $# -lt 3 ]; then
    echo "usage: $0 DOMAIN OPUS_DIR OUTDIR [nmtfrag split options...]" >&2
    echo "error: DOMAIN is one of: ${known% }" >&2
    exit 2
fi
domain=$1 opus_dir=$2 out=$3
shift 3

recipe="$root/corpora/$domain/recipe"
if [ ! -f "$recipe" ]; then
    echo "error: no recipe for '$domain' ($recipe); known domains: ${known% }" >&2
    exit 2
fi
# shellcheck source=/dev/null
. "$recipe"

if command -v nmtfrag >/dev/null 2>&1; then
    nmtfrag=(nmtfrag)
else
    nmtfrag=(python3 -m nmtfrag)
fi

overwrite=0
for arg in "$@"; do [ "$arg" = "--overwrite" ] && overwrite=1; done
if [ -f "$out/manifest.json" ] && [ $overwrite -eq 0 ]; then
    echo "error: $out already holds a finished split (manifest.json); choose another OUTDIR or pass --overwrite" >&2
    exit 2
fi

# Convert into a private temporary dir first, so a missing download leaves no OUTDIR.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "prepare_corpus: $CORPUS $RELEASE $SRC_LANG-$TGT_LANG from $opus_dir" >&2
"${nmtfrag[@]}" opus2tsv --recipe "$recipe" --opus-dir "$opus_dir" --out "$work/docs.tsv"

# split reads docs.tsv from the work dir (an --out may not contain its input), then
# docs.tsv joins the splits in OUTDIR.
"${nmtfrag[@]}" split --docs "$work/docs.tsv" --out "$out" \
    --train "$TRAIN" --valid "$VALID" --test "$TEST" --seed "$SEED" \
    --overflow "${OVERFLOW:-cut}" --dedup "${DEDUP:-test}" \
    --src-lang "$SRC_LANG" --tgt-lang "$TGT_LANG" "$@"
mv "$work/docs.tsv" "$out/docs.tsv"
stats_overwrite=()
[ $overwrite -eq 1 ] && stats_overwrite=(--overwrite)
"${nmtfrag[@]}" stats --dir "$out" --src-lang "$SRC_LANG" --tgt-lang "$TGT_LANG" \
    --out "$out/stats" "${stats_overwrite[@]}" >/dev/null
echo "prepare_corpus: done: $out (statistics in $out/stats/report.md; licence: $LICENCE)" >&2
