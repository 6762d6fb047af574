"""The runs.yaml of `scripts/compare.sh`: one run per cell, from its directory layout.

Why: compare.sh names its outputs by cell (eval-CELL, reconstruct-CELL, exposure-CELL,
mi-CELL, ft-CELL, rel-CELL); this turns whichever of them exist into the list that
`nmtfrag audit compare` reads, so the script holds no YAML of its own.

    python3 -m nmtfrag.audit.runs_yaml --out-dir RUNS/EMEA --approaches "baseline sent"
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence

import yaml

APPROACH = {
    "baseline": "no fine-tuning",
    "len4": "phrase release, max-len 4",
    "len4-tag": "phrase release, max-len 4, <P> tags",
    "len7": "phrase release, max-len 7",
    "len7-tag": "phrase release, max-len 7, <P> tags",
    "sent": "full sentences",
    "dp-release": "DP set-union phrase release, max-len 4, tags",
    "dp-sgd": "DP-SGD on full sentences",
}
FIELDS = (("evaluate", "eval-{}"), ("reconstruction", "reconstruct-{}"),
          ("exposure", "exposure-{}"), ("membership", "mi-{}"))


def runs_spec(out_dir: str, cells: Iterable[str], title: str) -> dict:
    """The spec for the cells that have an evaluation; paths relative to out_dir."""
    runs = []
    for cell in cells:
        if not os.path.exists(os.path.join(out_dir, f"eval-{cell}", "report.json")):
            continue
        run: dict[str, str | int] = {"name": cell, "approach": APPROACH.get(cell, cell)}
        for field, pattern in FIELDS:
            if os.path.exists(os.path.join(out_dir, pattern.format(cell), "report.json")):
                run[field] = pattern.format(cell)
        for cert in (f"ft-{cell}/privacy.json", f"rel-{cell}/privacy.json"):
            if os.path.exists(os.path.join(out_dir, cert)):
                run["privacy"] = cert
        if cell == "baseline":
            run["epsilon"] = 0  # uses no client data
        runs.append(run)
    return {"title": title, "runs": runs}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m nmtfrag.audit.runs_yaml",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--out-dir", required=True, metavar="DIR")
    p.add_argument("--approaches", required=True, help="cell names, space-separated")
    p.add_argument("--title", default="comparison")
    args = p.parse_args(argv)
    spec = runs_spec(args.out_dir, args.approaches.split(), args.title)
    if not spec["runs"]:
        print(f"error: no cell of {args.out_dir} has an evaluation", file=sys.stderr)
        return 2
    yaml.safe_dump(spec, sys.stdout, sort_keys=False, allow_unicode=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
