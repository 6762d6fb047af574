"""Canary secrets found in each cell's release, per repeat count.

Why: a release is public before any model is trained, so a planted secret that is in it
has leaked whatever the model does. Exposure and extraction measure the model only; this
measures what the owner ships. Read by the owner's own report (it opens the canaries'
key); only counts leave it.
"""
from __future__ import annotations

import os
from typing import Any, Sequence

from ..audit.canaries import read_canaries, secrets_in_release
from ..fileio import read_json
from .plan import RELEASE, Paths


def release_secrets(paths: Paths, name: str) -> dict[str, dict[str, int]] | None:
    """audit.canaries.secrets_in_release for a cell's release; None without a release
    here (an imported cell's stayed on its machine) or without planted canaries."""
    key = os.path.join(paths.owner_data, "canaries.json")
    rel = paths.step(name, RELEASE)
    man = os.path.join(rel, "manifest.json")
    if not (os.path.isfile(key) and os.path.isfile(man)):
        return None
    files = read_json(man).get("files") or {}
    src, tgt = (os.path.join(rel, files.get(k, "")) for k in ("src", "tgt"))
    if not (os.path.isfile(src) and os.path.isfile(tgt)):
        return None
    with open(src, encoding="utf-8") as s, open(tgt, encoding="utf-8") as t:
        return secrets_in_release(read_canaries(key), s, t)


def render(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The report's section (Markdown lines): every releasing cell (rows holding the key),
    one whose release is not here said so; none when no release was checked."""
    shown = [r for r in rows if "release_secrets" in r]
    have = [r for r in shown if r["release_secrets"]]
    if not have:
        return []
    # r = 0: the never-planted reference canaries, which no release can hold
    repeats = sorted({k for r in have for k in r["release_secrets"] if int(k) > 0}, key=int)
    lines = ["", "## Canary secrets in each release", "",
             "| release | " + " | ".join(f"r={k}" for k in repeats)
             + " | beside its record number |",
             "|---|" + "---:|" * (len(repeats) + 1)]
    for r in shown:
        got = r["release_secrets"]
        if not got:
            lines.append(f"| {r['name']} | " + " | ".join("–" for _ in repeats)
                         + " | – (release not here, e.g. imported) |")
            continue
        cells = [f"{got[k]['secret']}/{got[k]['canaries']}" if k in got else "–"
                 for k in repeats]
        linked = sum(got[k]["with_record"] for k in repeats if k in got)
        lines.append(f"| {r['name']} | " + " | ".join(cells) + f" | {linked} |")
    lines += ["", "Canaries planted r times whose whole secret is in a released target "
              "phrase: leaked by the release itself, before any training. Beside its record "
              "number: released in a pair whose source holds the canary's record number, "
              "which ties the secret to its patient (the canaries' templates put the two "
              "8–10 target words apart, so only a release of longer phrases, or a "
              "misalignment, can hold both). The counts need not grow with r: e.g. where "
              "the aligner links a canary's record number to its secret, no short phrase "
              "holds either.", ""]
    return lines
