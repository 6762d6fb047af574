"""Confidentiality audits: what a release or a trained model gives away.

  nmtfrag audit reconstruct --release release/ --src train.de --tgt train.en --out audit/
      rebuild as much text as the release justifies (the attack reads only the
      release), then score it against the original corpus
  nmtfrag audit canaries insert --src train.de --tgt train.en --count 20 \\
      --repeats 1,10,100 --seed 1 --out canaried/
      plant synthetic sentence pairs carrying random secrets (new corpus + canaries.json)
  nmtfrag audit exposure --model adapted/ --canaries canaried/canaries.json --out audit/
      exposure of each planted secret and whether beam search outputs it verbatim
  nmtfrag audit compare --runs runs.yaml --out comparison/
      one report (report.md, report.json, privacy-utility plot): BLEU × leakage × ε
"""
HELP = "audit a release (reconstruction attack) or a model (canary exposure); compare runs"


def _sub(subparsers, name, help_text, description):
    import argparse

    p = subparsers.add_parser(name, help=help_text, description=description,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    return p


def add_arguments(p):
    sub = p.add_subparsers(dest="audit_command", metavar="AUDIT", parser_class=type(p))
    sub.required = True

    r = _sub(sub, "reconstruct", "rebuild text from a release and score it against the corpus",
             "Reconstruction attack on a phrase-pair release (in the spirit of Gallé & "
             "Tealdi 2015): chains fragments whose targets AND sources overlap, keeping only "
             "mutual, unambiguous best overlaps, into the longest pieces the release "
             "justifies. The attack reads only --release; --src/--tgt (the original corpus) "
             "are used to score it: sentences rebuilt exactly, n-grams longer than max-len "
             "recovered, longest recovered span per sentence.\n\nexample:\n  nmtfrag audit "
             "reconstruct --release release/ --src train.de --tgt train.en --out audit/")
    r.add_argument("--release", required=True, metavar="DIR",
                   help="release directory written by `nmtfrag extract`")
    r.add_argument("--src", required=True, metavar="FILE",
                   help="original source side the release was made from (scoring only)")
    r.add_argument("--tgt", required=True, metavar="FILE", help="original target side")
    r.add_argument("--out", required=True, metavar="DIR", help="output directory")
    r.add_argument("--min-overlap", type=int, default=None, metavar="N",
                   help="fewest shared target words to chain two fragments (default: 2, or "
                        "1 when no fragment is longer than 2 words)")
    r.add_argument("--pretokenized", default=None, action="store_true",
                   help="the corpus is already Moses-tokenised (default: as recorded in "
                        "the release manifest)")
    r.add_argument("--max-len", type=int, default=None, metavar="N",
                   help="max-len of the release (default: from its manifest, else the "
                        "longest fragment)")
    r.add_argument("--write-chains", action="store_true",
                   help="also write the rebuilt chains to OUT/chains.LANG (confidential: "
                        "they are pieces of the corpus)")
    r.add_argument("--overwrite", action="store_true", help="replace a finished OUT")
    r.set_defaults(_audit_run=_run_reconstruct)


def _run_reconstruct(args):
    import sys

    from ..audit.reconstruction_score import audit_reconstruction

    rep = audit_reconstruction(args.release, args.src, args.tgt, args.out,
                               min_overlap=args.min_overlap, pretokenized=args.pretokenized,
                               max_len=args.max_len, write_chains=args.write_chains,
                               overwrite=args.overwrite, show_progress=True)
    s = rep["scores"]
    print(f"nmtfrag audit reconstruct: {rep['attack']['chains']} chains; sentence pairs "
          f"rebuilt exactly {100 * s['pair']['rebuilt_exactly_share']:.2f}%, target "
          f"{rep['max_len'] + 1}…{2 * rep['max_len']}-grams recovered "
          f"{100 * (s['tgt']['ngrams_recovered_share'] or 0):.2f}%; report in {args.out}",
          file=sys.stderr)
    return 0


def run(args):
    return args._audit_run(args)
