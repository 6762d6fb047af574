"""The length penalty chosen on public text: the best BLEU of the candidates there, read
back by evaluate --lenpen-from; bad candidates and a directory that is no choice refused."""
import json
import os

import pytest

from nmtfrag.errors import InputError
from nmtfrag.translate.evaluate import Decoding, evaluate
from nmtfrag.translate.length_penalty import choose_length_penalty, chosen_lenpen
from tinymodel import make_corpus, write_parallel


@pytest.fixture(scope="module")
def public(tmp_path_factory):
    d = tmp_path_factory.mktemp("public-valid")
    return write_parallel(make_corpus(40, seed=21, min_len=4, max_len=12), str(d / "valid"))


def test_the_chosen_penalty_has_the_best_public_bleu_and_evaluate_uses_it(
        tiny_model_dir, public, tmp_path):
    man = choose_length_penalty(str(tmp_path / "lp"), model=tiny_model_dir, src=public[0],
                                ref=public[1], candidates=(0.5, 1.0, 3.0), first=30)
    with open(tmp_path / "lp" / "report.json") as f:
        rows = json.load(f)["candidates"]
    assert [r["lenpen"] for r in rows] == [0.5, 1.0, 3.0]
    best = max(r["bleu"] for r in rows)
    ties = [r["lenpen"] for r in rows if r["bleu"] == best]
    assert man["lenpen"] == min(ties, key=lambda x: abs(x - 1))
    assert chosen_lenpen(str(tmp_path / "lp")) == man["lenpen"]
    # the penalty changes the search: the longest-favouring candidate is never shorter
    assert rows[-1]["length_ratio"] >= rows[0]["length_ratio"]
    rep = evaluate(str(tmp_path / "ev"), model=tiny_model_dir, src=public[0], ref=public[1],
                   decoding=Decoding(lenpen=chosen_lenpen(str(tmp_path / "lp"))), first=10)
    assert rep["params"]["generation"]["lenpen"] == man["lenpen"]


def test_bad_candidates_and_a_directory_that_chose_nothing_are_refused(
        tiny_model_dir, public, tmp_path):
    with pytest.raises(InputError, match="candidates"):
        choose_length_penalty(str(tmp_path / "lp"), model=tiny_model_dir, src=public[0],
                              ref=public[1], candidates=(0.0,))
    os.makedirs(tmp_path / "empty")
    with pytest.raises(InputError, match="lenpen-from"):
        chosen_lenpen(str(tmp_path / "empty"))


def test_choosing_the_penalty_for_a_model_trained_on_owner_data_opens_no_owner_file(
        tiny_model_dir, public, tmp_path):
    """Issue 42: the penalty is chosen by a step that opens no owner file. A model is
    fine-tuned on an owner's sentences (its manifest names them); then the owner's folder
    is moved away, as after a release step. Choosing the penalty for that model still
    works, and of every file it opened (a sys audit hook records each open) none is the
    owner's, under the old name or the new."""
    import sys

    from test_finetune import FAST, run_finetune

    owner = tmp_path / "owner"
    owner.mkdir()
    train = write_parallel(make_corpus(60, seed=31, min_len=4, max_len=12),
                           str(owner / "train"))
    valid = write_parallel(make_corpus(10, seed=32, min_len=4, max_len=12),
                           str(owner / "valid"))
    model = str(tmp_path / "adapted")
    man = run_finetune(tiny_model_dir, list(train), model, valid_src=valid[0],
                       valid_tgt=valid[1], max_updates=2, **FAST)
    assert {"train_src", "train_tgt"} <= set(man["inputs_sha256"])  # it read them
    hidden = tmp_path / "moved-away"
    os.rename(owner, hidden)  # any open of the owner's files by their names now fails
    opened, recording = [], [True]

    def record(event, args):
        if recording[0] and event == "open" and isinstance(args[0], (str, bytes)):
            opened.append(os.path.realpath(os.fsdecode(args[0])))

    sys.addaudithook(record)  # cannot be removed: switched off below
    try:
        choose_length_penalty(str(tmp_path / "lp"), model=model, src=public[0],
                              ref=public[1], candidates=(1.0, 2.0), first=10)
    finally:
        recording[0] = False
    assert os.path.realpath(public[0]) in opened  # the hook sees the step's reads
    assert not [p for p in opened if p.startswith((str(owner), os.path.realpath(hidden)))]
    assert chosen_lenpen(str(tmp_path / "lp")) in (1.0, 2.0)
