"""Plant canaries: synthetic sentence pairs carrying random secrets, repeated on purpose.

Carlini et al. (2019), "The Secret Sharer: Evaluating and Testing Unintended
Memorization in Neural Networks" (USENIX Security), and Thakkar et al. (2021),
"Understanding Unintended Memorization in Language Models Under Federated Learning":
insert sentences with a random secret, `repeats` times each, into the training data
before any release or training; later measure how far a trained model ranks the true
secret above the other possible ones (`nmtfrag.audit.exposure`).

Design choices (why):
- The secret is on the target side only. The source carries the canary's context and a
  record number (not secret, it identifies the canary); the target says what the secret
  is. If the secret were in the source too, any model that merely copies numbers and
  names would "expose" it, memorised or not.
- Secrets are drawn uniformly from a known space `R` (per slot a list of alternatives:
  6 digits → |R| = 10^6; first name × surname → |R| = 1,600), stored with each canary so
  exposure can enumerate or sample the same space.
- Canaries with repeats 0 are drawn the same way but never inserted: their exposure is
  the reference for "not memorised" (it should be near zero).
- Templates contain nothing Moses tokenisation or escaping would change, so the planted
  lines are the same whether the corpus is raw or already tokenised.
- Secrets, record numbers and positions come from the operating system's
  cryptographic source unless a seed is given: a canary whose secret an attacker can
  replay from a known seed measures nothing (`nmtfrag.randomness`).
- The input corpus is never modified; a new corpus, `canaries.json` (the key: keep it
  with the data owner) and `manifest.json` are written.
"""
from __future__ import annotations

import os
import random
from collections.abc import Iterable, Sequence

from ..data.corpus import validate_parallel
from ..errors import InputError
from ..fileio import MANIFEST, atomic_writer, sha256_file, tool_versions, write_json
from ..outdir import check_not_input, prepare_output_dir
from ..limits import MAX_CANARIES, MAX_CANARY_LINES
from ..randomness import Seed, resolve_seed

DIGITS = [str(d) for d in range(10)]
FIRST_NAMES = ["Anna", "Bernd", "Clara", "Dieter", "Elena", "Frank", "Greta", "Hans",
               "Ines", "Jonas", "Karin", "Lukas", "Marta", "Nils", "Olga", "Paul", "Rita",
               "Stefan", "Tanja", "Uwe", "Vera", "Walter", "Yvonne", "Zora", "Anton",
               "Berta", "Carl", "Doris", "Emil", "Frieda", "Gustav", "Hilde", "Ivan",
               "Jutta", "Kurt", "Lena", "Moritz", "Nora", "Otto", "Petra"]
SURNAMES = ["Albers", "Brandt", "Conrad", "Dietz", "Ebert", "Fiedler", "Gerlach",
            "Hesse", "Imhof", "Jansen", "Kessler", "Lorenz", "Mertens", "Nolte", "Oswald",
            "Pohl", "Quast", "Reimann", "Seidel", "Thiel", "Ulrich", "Vogt", "Wendt",
            "Zeller", "Arndt", "Bauer", "Czech", "Dorn", "Engel", "Falk", "Grimm",
            "Haas", "Ilg", "Jung", "Kraus", "Lang", "Marx", "Naumann", "Ott", "Pape"]

# kind → source template, target template (`{id}`: record number, `{secret}`), space.
KINDS: dict[str, dict] = {  # the shape make_canaries' `templates` takes
    "dosage": {
        "src": "Patientenakte {id} : die verordnete Tagesdosis ist vertraulich .",
        "tgt": "Patient record {id} : the prescribed daily dose is {secret} mg .",
        "space": {"slots": [DIGITS] * 6, "join": ""},
    },
    "name": {
        "src": "Patientenakte {id} : der Name des Patienten ist vertraulich .",
        "tgt": "Patient record {id} : the name of the patient is {secret} .",
        "space": {"slots": [FIRST_NAMES, SURNAMES], "join": " "},
    },
}


def space_size(space: dict) -> int:
    n = 1
    for slot in space["slots"]:
        n *= len(slot)
    return n


def secret_from_index(space: dict, index: int) -> str:
    """The index-th secret of the space (mixed radix, first slot most significant)."""
    parts = []
    for slot in reversed(space["slots"]):
        index, r = divmod(index, len(slot))
        parts.append(slot[r])
    return space["join"].join(reversed(parts))


def index_of_secret(space: dict, secret: str) -> int:
    parts = list(secret) if space["join"] == "" else secret.split(space["join"])
    if len(parts) != len(space["slots"]):
        raise ValueError(f"secret {secret!r} does not fit its space")
    index = 0
    for slot, part in zip(space["slots"], parts):
        index = index * len(slot) + slot.index(part)
    return index


def _rng(seed, stream=0):
    """A `random.Random`-like generator: seeded (stream `stream` of an int seed) when
    the seed is reproducible, else the OS's cryptographic source."""
    seed = resolve_seed(seed)
    if not seed.reproducible:
        return random.SystemRandom()
    return random.Random(seed.value + stream)


def _check_sizes(count, repeats, unseen):
    """Refuse more canaries than there are record numbers (drawing them would loop for
    ever) and more inserted lines than nmtfrag.limits allows (they are held in memory)."""
    total = count * len(repeats) + unseen
    if total > MAX_CANARIES:
        raise InputError(f"--count {count} × {len(repeats)} repeat values + --unseen "
                         f"{unseen} = {total:,} canaries: at most {MAX_CANARIES:,} (each "
                         f"gets a distinct 5-digit record number)")
    lines = count * sum(repeats)
    if lines > MAX_CANARY_LINES:
        raise InputError(f"--count {count} × --repeats {','.join(map(str, repeats))} = "
                         f"{lines:,} inserted lines: at most {MAX_CANARY_LINES:,}")


def make_canaries(count: int, repeats: Sequence[int], seed: int | Seed | None = None,
                  kinds: Sequence[str] = ("dosage", "name"), unseen: int | None = None,
                  templates: dict[str, dict] | None = None) -> list[dict]:
    """Canary records: `count` per repeat value (kinds alternating), plus `unseen`
    (default `count`) with repeats 0. Record numbers and secrets are distinct; drawn
    from `seed` (int or randomness.Seed) or, with None, secret randomness."""
    templates = templates or KINDS
    for k in kinds:
        if k not in templates:
            raise InputError(f"unknown canary kind {k!r} (known: {', '.join(templates)})")
    if count < 1:
        raise InputError("--count must be at least 1")
    if any(r < 1 for r in repeats):
        raise InputError("--repeats must be positive integers")
    unseen = count if unseen is None else unseen
    _check_sizes(count, repeats, unseen)
    rng = _rng(seed)
    plan = [r for r in repeats for _ in range(count)] + [0] * unseen
    used_ids: set[str] = set()
    used_secrets: set[tuple[str, int]] = set()
    out: list[dict] = []
    for n, rep in enumerate(plan):
        kind = kinds[n % len(kinds)]
        t = templates[kind]
        size = space_size(t["space"])
        while True:
            rid = str(rng.randrange(10000, 100000))
            if rid not in used_ids:
                break
        used_ids.add(rid)
        while True:
            idx = rng.randrange(size)
            if (kind, idx) not in used_secrets or len(used_secrets) >= size:
                break
        used_secrets.add((kind, idx))
        secret = secret_from_index(t["space"], idx)
        out.append({
            "name": f"canary-{n + 1:03d}", "kind": kind, "repeats": rep,
            "record": rid, "secret": secret,
            "src": t["src"].format(id=rid),
            "tgt": t["tgt"].format(id=rid, secret=secret),
            "tgt_template": t["tgt"].replace("{id}", rid),
            "space": t["space"], "space_size": size,
        })
    return out


def insert_canaries(src: str, tgt: str, out: str, *, count: int = 20,
                    repeats: Sequence[int] = (1, 10, 100), seed: int | Seed | None = None,
                    kinds: Sequence[str] = ("dosage", "name"), unseen: int | None = None,
                    overwrite: bool = False) -> list[dict]:
    """Write out/<src name>, out/<tgt name> (the corpus with canaries at random
    positions), out/canaries.json (mode 0600: the secrets, and the seed if one was
    given) and out/manifest.json (whether the run was seeded, never the secrets).
    Returns the canaries. `seed` None: secret randomness."""
    seed = resolve_seed(seed)
    n_lines = validate_parallel(src, tgt, "--src/--tgt")
    canaries = make_canaries(count, repeats, seed, kinds, unseen)
    src_name, tgt_name = os.path.basename(src), os.path.basename(tgt)
    if src_name == tgt_name:
        raise InputError(f"{src} and {tgt} have the same file name")
    out = prepare_output_dir(out, overwrite, inputs=[src, tgt], kind="nmtfrag-canaried-corpus")
    out_src, out_tgt = os.path.join(out, src_name), os.path.join(out, tgt_name)
    for p in (out_src, out_tgt):
        check_not_input(p, [src, tgt])
    planted = [c for c in canaries if c["repeats"] > 0]
    inserts = [i for i, c in enumerate(planted) for _ in range(c["repeats"])]
    rng = _rng(seed, 1)
    total = n_lines + len(inserts)
    slots = sorted(rng.sample(range(total), len(inserts)))
    rng.shuffle(inserts)
    at = dict(zip(slots, inserts))  # output line index → canary
    for c in canaries:
        c["lines"] = []
    # Every input line is copied as it is (empty ones too), in order, around the canaries.
    with open(src, encoding="utf-8", newline="") as fs, \
            open(tgt, encoding="utf-8", newline="") as ft, \
            atomic_writer(out_src) as ws, atomic_writer(out_tgt) as wt:
        lines = zip(fs, ft)
        for pos in range(total):
            if pos in at:
                c = planted[at[pos]]
                ws.write(c["src"] + "\n")
                wt.write(c["tgt"] + "\n")
                c["lines"].append(pos + 1)
            else:
                s, t = next(lines)
                ws.write(s if s.endswith("\n") else s + "\n")
                wt.write(t if t.endswith("\n") else t + "\n")
    key = {"kind": "nmtfrag-canaries", "randomness": seed.owner_record(),
           "corpus_lines": n_lines,
           "output_lines": total, "files": {"src": src_name, "tgt": tgt_name},
           "canaries": canaries}
    write_json(os.path.join(out, "canaries.json"), key, private=True)
    write_json(os.path.join(out, MANIFEST), {
        "kind": "nmtfrag-canaried-corpus",
        "params": {"count": count, "repeats": list(repeats),
                   "seed": seed.value if seed.reproducible else None,
                   "kinds": list(kinds), "unseen": sum(1 for c in canaries if not c["repeats"])},
        "randomness": seed.public_record(),
        "inputs": {"src": sha256_file(src), "tgt": sha256_file(tgt)},
        "counts": {"input_lines": n_lines, "canaries": len(canaries),
                   "planted_canaries": len(planted), "inserted_lines": len(inserts),
                   "output_lines": total},
        "files": [src_name, tgt_name, "canaries.json"],
        "tool_versions": tool_versions("nmtfrag"),
    })
    return canaries


def read_canaries(path: str) -> list[dict]:
    from ..fileio import read_json

    if not os.path.exists(path):
        raise InputError(f"{path}: no such file")
    try:
        key = read_json(path)
    except ValueError as exc:
        raise InputError(f"{path}: not JSON ({exc})") from None
    if key.get("kind") != "nmtfrag-canaries" or not key.get("canaries"):
        raise InputError(f"{path}: not a canaries.json written by `nmtfrag audit canaries`")
    return key["canaries"]


def secrets_in_release(canaries: Sequence[dict], src_lines: Iterable[str],
                       tgt_lines: Iterable[str]) -> dict[str, dict[str, int]]:
    """{repeats (as a string, like exposure's keys): {"canaries", "secret", "with_record"}}:
    how many canaries planted that often have their whole secret in a released target
    phrase, and how many of those in a pair whose source also holds the canary's record
    number.

    Why: a release is public before any model is trained, so a secret in it has leaked
    whatever the model does; exposure measures the model only. Matched on whole tokens
    (a secret of several words in order), so "596853" is not found inside "1596853"."""
    by_secret = {f" {c['secret']} ": c for c in canaries}
    found: dict[str, bool] = {}  # canary name → its record number in the same pair
    for src, tgt in zip(src_lines, tgt_lines):
        t = f" {tgt.strip()} "
        for key, c in by_secret.items():
            if key in t:
                linked = f" {c['record']} " in f" {src.strip()} "
                found[c["name"]] = found.get(c["name"], False) or linked
    out: dict[str, dict[str, int]] = {}
    for c in sorted(canaries, key=lambda c: int(c["repeats"])):
        row = out.setdefault(str(c["repeats"]), {"canaries": 0, "secret": 0, "with_record": 0})
        row["canaries"] += 1
        if c["name"] in found:
            row["secret"] += 1
            row["with_record"] += found[c["name"]]
    return out
