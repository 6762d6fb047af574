"""The values a study config's `${VAR}`s had when the study ran (OUT/owner/variables.json).

Why: `study status` and `study report` start nothing, yet their config names its model and
data through `${MODELS}`, `${DATA}`, …; asking the user to set them again for a look at a
study is a trap (pasted examples failed). Each `study run` records the values it used, and
a later status or report takes a recorded value for a variable its shell leaves unset.
The values are paths of the owner's machine, so they go to OUT/owner/ (mode 0700), never
to a file that may be shared.
"""
from __future__ import annotations

import os

from ..fileio import OWNER_DIR, read_json, write_owner_json

NAME = "variables.json"
KIND = "nmtfrag-study-variables"


def variables_path(out: str) -> str:
    return os.path.join(out, OWNER_DIR, NAME)


def recorded_variables(out: str) -> dict[str, str]:
    """{VAR: value} as the last `study run` in OUT used them ({} before any)."""
    path = variables_path(out)
    if not os.path.isfile(path):
        return {}
    got = read_json(path).get("variables")
    return {str(k): str(v) for k, v in got.items()} if isinstance(got, dict) else {}


def record_variables(out: str, used: dict[str, str]) -> None:
    """Add (or update) the values this run used; values of variables it did not use stay."""
    if not used and not os.path.isfile(variables_path(out)):
        return
    merged = {**recorded_variables(out), **used}
    write_owner_json(out, {"kind": KIND, "variables": merged}, NAME)
