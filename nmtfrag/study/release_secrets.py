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


def release_secrets(paths: Paths, name: str) -> dict[int, dict[str, int]] | None:
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
    """The report's section (Markdown lines); none when no release was checked."""
    have = [r for r in rows if r.get("release_secrets")]
    if not have:
        return []
    repeats = sorted({k for r in have for k in r["release_secrets"] if k > 0})
    lines = ["## Canary secrets in each release", "",
             "| release | " + " | ".join(f"r={k}" for k in repeats)
             + " | with its record in the same pair |",
             "|---|" + "---:|" * (len(repeats) + 1)]
    for r in have:
        got = r["release_secrets"]
        cells = [f"{got[k]['secret']}/{got[k]['canaries']}" if k in got else "–"
                 for k in repeats]
        linked = sum(v["with_record"] for v in got.values())
        lines.append(f"| {r['name']} | " + " | ".join(cells) + f" | {linked} |")
    lines += ["", "Canaries planted r times whose whole secret is in a released target "
              "phrase: leaked by the release itself, before any training. With its record: "
              "released in a pair whose source holds the canary's record number, which ties "
              "the secret to its patient. A canary whose record number the aligner links to "
              "its secret yields no short phrase holding either, so the counts need not "
              "grow with r.", ""]
    return lines
