#!/usr/bin/env python3
"""Copy a study's report into docs/results/, unedited, so the results page can cite it.

usage: python3 scripts/publish_study_report.py STUDY_OUT NAME

Writes docs/results/NAME.md (OUT/report/report.md under a comment saying when it was
copied) and docs/results/NAME-privacy-utility.png, with the report's figure
link pointed at that copy. The report holds aggregate figures only (no path, no sentence
of the owner's data); this script refuses one that names an absolute path.
"""
from __future__ import annotations

import datetime
import os
import re
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIGURE = "privacy_utility.png"


def publish(study_out: str, name: str, docs: str = os.path.join(ROOT, "docs", "results")
            ) -> str:
    report = os.path.join(study_out, "report", "report.md")
    if not os.path.isfile(report):
        raise SystemExit(f"error: {report}: no report (run `nmtfrag study report` first)")
    with open(report, encoding="utf-8") as f:
        text = f.read()
    if re.search(r"(^|[\s(`'\"])(/[\w.-]+/|[A-Za-z]:\\)", text):
        raise SystemExit(f"error: {report} names an absolute path; not copied")
    figure = f"{name}-privacy-utility.png"
    text = text.replace(f"]({FIGURE})", f"]({figure})")
    today = datetime.date.today().isoformat()
    head = (f"<!-- copied by scripts/publish_study_report.py on {today}; regenerate, do "
            f"not edit -->\n")
    out = os.path.join(docs, f"{name}.md")
    with open(out, "w", encoding="utf-8") as f:
        f.write(head + text)
    src_fig, dst_fig = os.path.join(study_out, "report", FIGURE), os.path.join(docs, figure)
    if os.path.isfile(src_fig):
        shutil.copyfile(src_fig, dst_fig)
    elif os.path.isfile(dst_fig):
        os.unlink(dst_fig)  # an older study's figure beside a newer report would mislead
    return out


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__.split("\n\n")[1])
    print(publish(sys.argv[1], sys.argv[2]))
