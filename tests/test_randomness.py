"""Secret randomness by default, and owner-only files that stay with the data owner."""
import json
import os
import stat

from nmtfrag.fileio import OWNER_DIR, write_json, write_owner_json
from nmtfrag.randomness import resolve_seed


def test_secret_seeds_differ_and_are_not_recorded():
    a, b = resolve_seed(None), resolve_seed(None)
    assert not a.reproducible and not b.reproducible
    assert a.numpy_rng().random(4).tolist() != b.numpy_rng().random(4).tolist()
    # two generators of the same secret Seed still differ: nothing is derived from .value
    assert a.numpy_rng().random(4).tolist() != a.numpy_rng().random(4).tolist()
    assert a.torch_generator().initial_seed() != a.torch_generator().initial_seed()
    assert a.owner_record()["seed"] is None
    assert str(a.value) not in json.dumps(a.public_record())
    assert a.public_record()["private"] is True


def test_seeded_is_reproducible_and_marked_not_private():
    a, b = resolve_seed(7), resolve_seed(7)
    assert a.numpy_rng().random(4).tolist() == b.numpy_rng().random(4).tolist()
    assert a.torch_generator().initial_seed() == 7
    assert a.public_record()["private"] is False
    assert "7" not in json.dumps(a.public_record())
    assert a.owner_record() == {"source": "seeded", "seed": 7}


def test_owner_files_are_private(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    path = write_owner_json(str(out), {"sha256": "x"})
    assert os.path.dirname(path) == str(out / OWNER_DIR)
    assert stat.S_IMODE(os.stat(out / OWNER_DIR).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    write_json(str(out / "manifest.json"), {})
    assert stat.S_IMODE(os.stat(out / "manifest.json").st_mode) & 0o044  # shareable
