"""Membership inference against a trained translation model: the loss-threshold attack.

Yeom et al. (2018), "Privacy Risk in Machine Learning: Analyzing the Connection to
Overfitting" (CSF): a model's loss on its own training pairs tends to be lower than on
pairs it never saw, so an attacker who can score a pair guesses "member" when the loss is
low. With a reference model (e.g. the generic base model before fine-tuning) the score is
calibrated per pair — loss under the reference minus loss under the target, the
difficulty calibration of Watson et al. (2022), "On the Importance of Difficulty
Calibration in Membership Inference Attacks" (ICLR) — so pairs that are simply easy do
not look like members.

Reported, as Carlini et al. (2022), "Membership Inference Attacks From First Principles"
(S&P) recommend: the ROC AUC and the true-positive rate at a 1% false-positive rate
(an attack that is right about a few members with confidence matters more than its
average). AUC 0.5 means the attack does no better than chance.

Two things keep the figures from understating the leak. A held-out pair that is also a
training pair is a member, not a non-member (90 of EMEA's 2,001 test lines are training
pairs; counted as non-members they lowered the AUC): such pairs are dropped
from the non-members and counted. And a pair the training data holds k times is learned
k times; DP-SGD's ε is per occurrence, so k copies have only group privacy (kε): the
attack is also reported on the members that occur once and on those repeated (EMEA: 76%
of the sampled training lines hold a pair that occurs again, 9 times in the median).

Held-out pairs from other documents (EMEA's and GNOME's test sets are split by document)
also differ from the training pairs as documents do, so the attack can tell the training
documents from others as well as the training pairs. A model trained on a share of the
files (`finetune --dp --train-fraction`, whose OUT/owner/trained-lines.txt `--member-lines`
reads) is also attacked against the pairs of the same files it did not train on: the
same documents, so that figure is of the pairs alone.

A pair's loss is the teacher-forced negative log-likelihood of its target (subword
tokens and end of sentence, no label smoothing, dropout off) divided by the number of
target tokens; for an ensemble, the mean over its members.
"""
from __future__ import annotations

import os
import random
import re
from collections.abc import Container, Iterator, Sequence
from typing import TYPE_CHECKING, cast

from ..errors import InputError
from ..fileio import (MANIFEST, atomic_writer, public_name, read_json, sha256_file,
                      tool_versions, write_json)
from ..outdir import prepare_output_dir

if TYPE_CHECKING:  # generate loads fairseq: import it only to run the attack
    from ..translate.fairseq_engine import Translator
    from ..randomness import Seed

ATTACK = "loss threshold (Yeom et al. 2018)"
CALIBRATED = "reference-calibrated loss difference (Watson et al. 2022)"


def roc_auc(member_scores: Sequence[float], nonmember_scores: Sequence[float]) -> float:
    """P(member score > non-member score) + ½ P(tie), from ranks (Mann–Whitney U)."""
    from scipy.stats import rankdata

    m, n = len(member_scores), len(nonmember_scores)
    if not m or not n:
        raise InputError("membership inference needs members and non-members")
    ranks = rankdata(list(member_scores) + list(nonmember_scores))
    return float((ranks[:m].sum() - m * (m + 1) / 2) / (m * n))


def tpr_at_fpr(member_scores: Sequence[float], nonmember_scores: Sequence[float],
               fpr: float = 0.01) -> float:
    """Largest share of members flagged by a threshold that flags at most `fpr` of the
    non-members (flag = score strictly above the threshold)."""
    ranked = sorted(nonmember_scores, reverse=True)
    allowed = int(fpr * len(ranked))  # non-members that may be flagged
    if allowed >= len(ranked):
        return 1.0
    threshold = ranked[allowed]
    return sum(1 for s in member_scores if s > threshold) / len(member_scores)


def pair_losses(translator: Translator, pairs: Sequence[tuple[str, str]],
                mode: str = "raw", batch_size: int = 64) -> list[float]:
    """Mean target-token NLL (nats) of each (src, tgt) pair under a loaded Translator."""
    import torch
    from fairseq.data import LanguagePairDataset

    bpe = translator.bpe
    src_sub, _ = bpe.encode_lines([s for s, _ in pairs], translator.src_lang, mode,
                                  keep_tags=False)
    tgt_sub, _ = bpe.encode_lines([t for _, t in pairs], translator.tgt_lang, mode,
                                  keep_tags=False)
    sd, td = translator.src_dict, translator.tgt_dict
    src = [sd.encode_line(s, add_if_not_exist=False).long() for s in src_sub]
    tgt = [td.encode_line(t, add_if_not_exist=False).long() for t in tgt_sub]
    ds = LanguagePairDataset(src, [len(x) for x in src], sd, tgt, [len(x) for x in tgt],
                             td, left_pad_source=True)
    losses = [0.0] * len(pairs)
    with torch.no_grad():
        for start in range(0, len(ds), batch_size):
            sample = ds.collater([ds[i] for i in range(start, min(len(ds),
                                                                   start + batch_size))])
            target = sample["target"].to(translator.device)
            net_input = {k: v.to(translator.device) for k, v in sample["net_input"].items()}
            mask = target.ne(td.pad())
            total = 0.0
            for model in translator.models:
                lp = model.get_normalized_probs(model(**net_input), log_probs=True)
                nll = -lp.float().gather(-1, target.unsqueeze(-1)).squeeze(-1)
                total = total + (nll * mask).sum(1) / mask.sum(1)
            mean = cast("torch.Tensor", total) / len(translator.models)  # ≥ 1 model added
            for i, loss in zip(sample["id"].tolist(), mean.tolist()):
                losses[i] = loss
    return losses


def _pair_files(spec: Sequence[str], src_lang: str, tgt_lang: str,
                what: str) -> tuple[str, str]:
    """The two files a prefix (PREFIX.src_lang/.tgt_lang) or SRC TGT names."""
    if len(spec) == 1:
        spec = [f"{spec[0]}.{src_lang}", f"{spec[0]}.{tgt_lang}"]
    if len(spec) != 2:
        raise InputError(f"{what} takes a prefix or two files SRC TGT")
    return spec[0], spec[1]


def _numbered_pairs(spec: Sequence[str], src_lang: str, tgt_lang: str,
                    what: str) -> Iterator[tuple[int, str, str]]:
    """(1-based line, src, tgt) of each usable pair of a prefix (PREFIX.src_lang/.tgt_lang)
    or two files, checked first."""
    from ..data.corpus import SkipLog, read_parallel, validate_parallel

    src_path, tgt_path = _pair_files(spec, src_lang, tgt_lang, what)
    for p in (src_path, tgt_path):
        if not os.path.isfile(p):
            raise InputError(f"{what}: {p}: no such file")
    validate_parallel(src_path, tgt_path, what)
    return read_parallel(src_path, tgt_path, SkipLog())


def read_pairs(spec: Sequence[str], src_lang: str, tgt_lang: str,
               what: str) -> list[tuple[str, str]]:
    """(src, tgt) lines from a prefix (PREFIX.src_lang/.tgt_lang) or two files."""
    return [(s, t) for _, s, t in _numbered_pairs(spec, src_lang, tgt_lang, what)]


def read_member_lines(path: str) -> set[int]:
    """0-based line numbers, one a line (OUT/owner/trained-lines.txt of a
    `finetune --dp --train-fraction` run): the lines of --members the model trained on."""
    if os.path.isdir(path):
        raise InputError(f"--member-lines {path}: is a directory, not a file of line numbers")
    if not os.path.isfile(path):
        raise InputError(f"--member-lines {path}: no such file")
    lines: set[int] = set()
    try:
        with open(path, encoding="utf-8") as f:
            for k, text in enumerate(f, 1):
                if not text.strip():
                    continue
                if not re.fullmatch(r"[0-9]+", text.strip()):
                    raise InputError(f"--member-lines {path}:{k}: {text.strip()[:40]!r} is "
                                     f"not a 0-based line number")
                lines.add(int(text))
    except UnicodeDecodeError as exc:
        raise InputError(f"--member-lines {path}: not UTF-8 text ({exc.reason})") from None
    if not lines:
        raise InputError(f"--member-lines {path}: no line numbers")
    return lines


def check_lines_match_members(lines_path: str, spec: Sequence[str], src_lang: str,
                              tgt_lang: str) -> bool:
    """Refuse line numbers written for other files: where the lines file sits in a
    finetune OUT/owner/ beside the run's manifest, the --members files must be the ones
    that run trained on (by SHA-256; shifted numbers would otherwise pick the wrong pairs
    without an error). False where there is no such manifest to check against."""
    manifest = os.path.join(os.path.dirname(os.path.abspath(lines_path)), MANIFEST)
    if not os.path.isfile(manifest):
        return False
    trained = read_json(manifest).get("inputs_sha256", {})
    if "train_src" not in trained or "train_tgt" not in trained:
        return False
    files = _pair_files(spec, src_lang, tgt_lang, "--members")
    for side, path in zip(("train_src", "train_tgt"), files):
        if os.path.isfile(path) and sha256_file(path) != trained[side]:
            raise InputError(f"--member-lines {lines_path} numbers the lines of the files "
                             f"its run trained on ({manifest}), and --members {path} is "
                             f"not that run's {side.replace('_', ' ')} file (SHA-256 "
                             f"differs): give the files the run trained on")
    return True


def split_by_lines(spec: Sequence[str], src_lang: str, tgt_lang: str,
                   lines: set[int]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The --members pairs at `lines` (0-based: what the model trained on) and the other
    usable pairs of the same files (held out of training, from the same documents)."""
    trained: list[tuple[str, str]] = []
    rest: list[tuple[str, str]] = []
    seen: set[int] = set()
    for n, s, t in _numbered_pairs(spec, src_lang, tgt_lang, "--members"):
        (trained if n - 1 in lines else rest).append((s, t))
        seen.add(n - 1)
    unknown = sorted(lines - seen)
    if unknown:
        raise InputError(f"--member-lines names {len(unknown)} line(s) that are no usable "
                         f"pair of --members (first: {unknown[0]}): written for other "
                         f"files?")
    return trained, rest


def leave_out_canaries(path: str, members: list[tuple[str, str]],
                       same: list[tuple[str, str]] | None
                       ) -> tuple[list[tuple[str, str]], list[tuple[str, str]] | None]:
    """Members and same-file non-members without the canary pairs planted in the training
    files (canaries.json at `path`): the exposure audit measures those."""
    from .canaries import read_canaries

    try:
        planted = {(c["src"], c["tgt"]) for c in read_canaries(path)}
    except (KeyError, TypeError):
        raise InputError(f"--leave-out-canaries {path}: a canary without its planted pair "
                         f"(src, tgt): not written by `nmtfrag audit canaries`?") from None
    members = [p for p in members if p not in planted]
    if not members:
        raise InputError(f"--leave-out-canaries {path}: no member pair is left once the "
                         f"planted pairs are left out")
    return members, None if same is None else [p for p in same if p not in planted]


def sample_pairs(pairs: list[tuple[str, str]], limit: int | None,
                 seed: int | None) -> list[tuple[str, str]]:
    """At most `limit` pairs, a uniform sample (seeded: the audit is not a mechanism)."""
    if limit is None or len(pairs) <= limit:
        return pairs
    return random.Random(seed).sample(pairs, limit)


def held_out_only(members: Container[tuple[str, str]],
                  nonmembers: Sequence[tuple[str, str]]) -> tuple[list[tuple[str, str]], int]:
    """The non-members that are not also members (`members`: a set or a Counter of the
    training pairs), and how many were dropped."""
    kept = [p for p in nonmembers if p not in members]
    return kept, len(nonmembers) - len(kept)


def by_repeats(counts: dict[tuple[str, str], int], members: Sequence[tuple[str, str]],
               member_scores: Sequence[float], nonmember_scores: Sequence[float]) -> dict:
    """The attack on the sampled members that occur once in the training data and on those
    repeated (`counts`: occurrences of each training pair), each against all non-members."""
    out: dict = {}
    for group, keep in (("once", lambda k: k == 1), ("repeated", lambda k: k > 1)):
        scores = [s for p, s in zip(members, member_scores) if keep(counts[p])]
        if scores:
            out[group] = {"members": len(scores), "auc": roc_auc(scores, nonmember_scores),
                          "tpr_at_1pct_fpr": tpr_at_fpr(scores, nonmember_scores)}
    return out


def audit_membership(model: str, members: list[tuple[str, str]],
                     nonmembers: list[tuple[str, str]], out: str, *,
                     reference: str | None = None, src_lang: str = "de",
                     tgt_lang: str = "en", mode: str = "raw",
                     max_pairs: int | None = None,
                     seed: int | Seed | None = None, checkpoint: str | None = None,
                     device: str = "cpu", batch_size: int = 64, overwrite: bool = False,
                     input_paths: Sequence[str] = (),
                     same_files: list[tuple[str, str]] | None = None) -> dict:
    """Run the attack on `model` (and calibrate with `reference`); write the report.

    `members`/`nonmembers` are lists of (src, tgt) pairs: training pairs of the model (the
    whole training set, for occurrence counts that mean what the model saw) and held-out
    pairs of the same distribution, those also among the members dropped; `input_paths`
    the files they were read from (OUT may not hold them); `same_files` the pairs of the
    members' files the model did not train on (a second set of non-members, from the same
    documents). `seed` None: the pair sample uses secret randomness."""
    from collections import Counter

    from ..translate.fairseq_engine import Translator
    from ..randomness import resolve_seed

    seed = resolve_seed(seed)
    counts = Counter(members)
    nonmembers, dropped = held_out_only(counts, nonmembers)
    if not nonmembers:
        raise InputError("no non-member pairs" if not dropped else
                         "every non-member pair is also a member pair: no held-out pairs "
                         "to compare with")
    members = sample_pairs(members, max_pairs, seed.value)
    nonmembers = sample_pairs(nonmembers, max_pairs, seed.value + 1)
    same, same_dropped = held_out_only(counts, same_files or [])
    if same_files is not None and not same:
        raise InputError("--member-lines: every other pair of the --members files is also a "
                         "trained pair: no held-out pairs of the same files"
                         if same_dropped else
                         "--member-lines names every pair of the --members files: no "
                         "untrained pair of the same files is left to compare with")
    same = sample_pairs(same, max_pairs, seed.value + 2)
    out = prepare_output_dir(out, overwrite, inputs=[model, reference, input_paths],
                             kind="nmtfrag-membership-audit")

    def losses(model_dir):
        tr = Translator(model_dir, src_lang, tgt_lang, checkpoint=checkpoint, device=device)
        return (pair_losses(tr, members, mode, batch_size),
                pair_losses(tr, nonmembers, mode, batch_size),
                pair_losses(tr, same, mode, batch_size) if same else [])

    lm, ln, ls = losses(model)
    scores = ([-x for x in lm], [-x for x in ln])
    report: dict = {  # the JSON report (this function's result)
        "kind": "nmtfrag-membership-audit", "attack": ATTACK,
        "model": public_name(model), "members": len(members),
        "non_members": len(nonmembers), "non_members_dropped_as_members": dropped,
        "text_mode": mode,
        "mean_loss": {"members": sum(lm) / len(lm), "non_members": sum(ln) / len(ln)},
        "uncalibrated": {"auc": roc_auc(*scores), "tpr_at_1pct_fpr": tpr_at_fpr(*scores)}}
    same_scores = [-x for x in ls]
    if reference is not None:
        rm, rn, rs = losses(reference)
        cal = ([r - x for r, x in zip(rm, lm)], [r - x for r, x in zip(rn, ln)])
        same_scores = [r - x for r, x in zip(rs, ls)]
        report["reference_model"] = public_name(reference)
        report["calibrated"] = {"auc": roc_auc(*cal), "tpr_at_1pct_fpr": tpr_at_fpr(*cal),
                                "attack": CALIBRATED}
    best = report.get("calibrated", report["uncalibrated"])
    report["auc"], report["tpr_at_1pct_fpr"] = best["auc"], best["tpr_at_1pct_fpr"]
    best_scores = cal if reference is not None else scores
    member_scores = best_scores[0]
    report["by_repeats"] = by_repeats(counts, members, *best_scores)
    if same:
        report["same_files"] = {
            "non_members": len(same), "non_members_dropped_as_members": same_dropped,
            "mean_loss": sum(ls) / len(ls),
            "auc": roc_auc(member_scores, same_scores),
            "tpr_at_1pct_fpr": tpr_at_fpr(member_scores, same_scores),
            "by_repeats": by_repeats(counts, members, member_scores, same_scores)}
    write_json(os.path.join(out, "report.json"), report)
    with atomic_writer(os.path.join(out, "report.md")) as f:
        f.write(render_markdown(report))
    write_json(os.path.join(out, MANIFEST), {  # last: the output is complete
        "kind": "nmtfrag-membership-audit",
        "params": {"text_mode": mode, "max_pairs": max_pairs,
                   "seed": seed.value if seed.reproducible else None,
                   "randomness": seed.source,
                   "checkpoint": checkpoint, "calibrated": reference is not None},
        "counts": {"members": len(members), "non_members": len(nonmembers),
                   "non_members_dropped_as_members": dropped,
                   **({"same_files_non_members": len(same)} if same else {})},
        "files": ["report.json", "report.md"],
        "tool_versions": tool_versions("nmtfrag", "fairseq-fixed", "torch"),
    })
    return report


GROUP_HEADER = ("| members | pairs | AUC | TPR at 1% FPR |", "|---|---:|---:|---:|")


def _group_rows(groups: dict) -> list[str]:
    """Table rows of `by_repeats` groups: the members held once, then the repeated."""
    return [f"| {label} | {groups[g]['members']} | {groups[g]['auc']:.3f} | "
            f"{groups[g]['tpr_at_1pct_fpr']:.3f} |"
            for g, label in (("once", "occur once"), ("repeated", "occur 2+ times"))
            if g in groups]


def render_markdown(report: dict) -> str:
    lines = ["# Membership inference", "",
             f"Model: `{report['model']}`; {report['members']} members (training pairs) "
             f"vs {report['non_members']} non-members (held out).", "",
             "| attack | AUC | TPR at 1% FPR |", "|---|---:|---:|",
             f"| {ATTACK} | {report['uncalibrated']['auc']:.3f} | "
             f"{report['uncalibrated']['tpr_at_1pct_fpr']:.3f} |"]
    if "calibrated" in report:
        c = report["calibrated"]
        lines.append(f"| {CALIBRATED}, reference `{report['reference_model']}` | "
                     f"{c['auc']:.3f} | {c['tpr_at_1pct_fpr']:.3f} |")
    groups = report.get("by_repeats") or {}
    if groups:
        lines += ["", "By how often a member occurs in the training data (the best attack "
                  "above, against all non-members; DP-SGD's ε covers one occurrence):", "",
                  *GROUP_HEADER, *_group_rows(groups)]
    if "same_files" in report:
        sf = report["same_files"]
        lines += ["", f"Against {sf['non_members']} pairs of the same files the model did "
                  f"not train on (the same documents: what the attack reads of the pairs "
                  f"alone, not of the documents; the best attack above):", "",
                  *GROUP_HEADER, f"| all | {report['members']} | {sf['auc']:.3f} | "
                  f"{sf['tpr_at_1pct_fpr']:.3f} |", *_group_rows(sf["by_repeats"])]
    if report.get("non_members_dropped_as_members"):
        lines += ["", f"{report['non_members_dropped_as_members']} held-out pair(s) are also "
                  f"training pairs: members, so not used as non-members."]
    lines += ["", f"Mean loss per target token: members {report['mean_loss']['members']:.3f}, "
              f"non-members {report['mean_loss']['non_members']:.3f} (nats).", "",
              "AUC 0.5 is chance; the TPR at 1% FPR says how many members the attack "
              "names with few false accusations. These are what this attack achieves: a "
              "lower bound on what the model leaks about membership."]
    return "\n".join(lines) + "\n"
