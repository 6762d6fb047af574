"""corpus.check_not_swapped: a pair that looks swapped against its languages is refused,
on strong evidence only (issue 31, item 4)."""
import pytest

from nmtfrag.data.corpus import check_not_swapped, language_evidence
from nmtfrag.errors import InputError

DE = "Die Dosis ist nicht für Kinder und wird mit dem Arzt auf der Packung angegeben .\n"
EN = "The dose is not for children and it is given with the doctor on the pack .\n"


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_swapped_pair_is_refused_with_its_evidence(tmp_path):
    de, en = write(tmp_path / "c.de", DE * 10), write(tmp_path / "c.en", EN * 10)
    check_not_swapped(de, en, "de", "en", "--train")  # the right way round
    with pytest.raises(InputError, match=r"^--train: the files look swapped: .*c\.en "
                                         r"\(for de\) reads as en and .*c\.de \(for en\) "
                                         r"as de \(\d+ vs 0 and \d+ vs 0 frequent"):
        check_not_swapped(en, de, "de", "en", "--train")
    check_not_swapped(en, de, "en", "de")  # an en→de model: right


def test_weak_or_one_sided_evidence_is_never_refused(tmp_path):
    de, en = write(tmp_path / "c.de", DE * 10), write(tmp_path / "c.en", EN * 10)
    few = write(tmp_path / "few.en", EN)  # under LANGUAGE_MIN_HITS words
    check_not_swapped(few, de, "de", "en")
    check_not_swapped(en, write(tmp_path / "en2", EN * 10), "de", "en")  # one side only
    mixed = write(tmp_path / "mixed", (DE + EN) * 10)  # neither language dominates
    check_not_swapped(mixed, de, "de", "en")
    toy = write(tmp_path / "toy", "milch menue blume garten .\n" * 100)  # no such words
    check_not_swapped(toy, toy, "de", "en")
    check_not_swapped(en, de, "de", "xx")  # a language without a list: not judged
    assert language_evidence(str(tmp_path / "missing"), "de", "en") is None


def test_only_the_start_of_a_file_is_read(tmp_path):
    from nmtfrag.data.corpus import LANGUAGE_SAMPLE_BYTES

    big = write(tmp_path / "big.en", "x " * LANGUAGE_SAMPLE_BYTES + EN * 50)
    assert language_evidence(big, "de", "en") == (0, 0)
