"""A certificate bound to the files it certifies: their SHA-256, recorded when it is made
and checked when it is read.

Why: a privacy.json (and the manifest's copy of it) copied into another model's
directory, or into the non-DP base model's, used to be accepted there: the certificate
described a mechanism, not the files in front of the reader. Recording the hash of every
shared file of the output (model.pt, dictionaries, bpecodes, released phrases, noisy
counts) ties the two: a file that is not the certified one is refused, named. This is a
recomputation, not an authentication: whoever rewrites the files and the hashes together
passes, as with any unsigned file.
"""
from __future__ import annotations

import os

from ..errors import InputError
from ..fileio import MANIFEST, sha256_file

FILES = "files"


class CertificateError(InputError):
    """A certificate field that is missing, of the wrong type, or does not follow from
    the rest of the certificate (raised by nmtfrag.dp.cert_check too)."""


NOT_BOUND = (MANIFEST, "privacy.json")  # the certificate and its manifest bind the rest


def shared_files(directory: str) -> list[str]:
    """The output's shared files: top-level regular files but the manifest, the
    certificate and hidden ones (locks); owner/ is never shared."""
    return sorted(f for f in os.listdir(directory)
                  if os.path.isfile(os.path.join(directory, f))
                  and f not in NOT_BOUND and not f.startswith("."))


def bind(cert: dict, directory: str) -> dict:
    """`cert` with the SHA-256 of every shared file of `directory` (in place; returned)."""
    cert[FILES] = {f: sha256_file(os.path.join(directory, f))
                   for f in shared_files(directory)}
    return cert


def check_bound(cert: dict, directory: str, required: list[str]) -> None:
    """Refuse (InputError naming the file) a certificate that binds no files, misses one
    of `required` (what the output kind must certify), or whose file in `directory` is
    missing or differs from the one certified."""
    files = cert.get(FILES)
    if not isinstance(files, dict) or not files or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise CertificateError(f"{FILES}: the certificate names no file it certifies (made "
                               "by an older nmtfrag, or edited): refusing it")
    for name in required:
        if name not in files:
            raise CertificateError(f"{FILES}: {name} is not among the files it certifies")
    for name, digest in files.items():
        if os.path.basename(name) != name or name in NOT_BOUND:
            raise CertificateError(f"{FILES}: {name!r} is not a file of the output")
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            raise InputError(f"{path}: missing: the certificate certifies it")
        if sha256_file(path) != digest:
            raise InputError(f"{path}: not the file the certificate certifies (its SHA-256 "
                             f"differs): the certificate belongs to another output")
