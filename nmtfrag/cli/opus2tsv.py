"""Convert an OPUS download (or a TMX translation memory) to the TSV `nmtfrag split` reads.

Writes one sentence pair per line, `doc_id<TAB>src<TAB>tgt`, in the input's order.
Exactly one input form:

  --recipe corpora/EMEA/recipe --opus-dir DIR
        find the files the recipe names in DIR (loose, or inside the OPUS .txt.zip) and
        use the recipe's document settings; if they are missing, exit 2 naming what to
        download and from where
  --moses SRC TGT --ids IDS
        OPUS Moses files and their .ids file (src_doc, tgt_doc, src ids, tgt ids)
  --xces ALIGN --src-docs DIR|ZIP --tgt-docs DIR|ZIP
        OPUS XCES sentence alignment (<lang1>-<lang2>.xml.gz) and the per-document XML
        of each language
  --tmx FILE --tmx-doc-prop NAME
        a TMX file whose units carry <prop type="NAME">document</prop> (OPUS's TMX
        files have no document ids: use the Moses download for OPUS corpora)

The document id is the source document path (--doc-key src), the target path (tgt) or
both (pair); --doc-regex keeps only a part of it (its first group), e.g. to group the
files of one directory into one document.

example:
  nmtfrag opus2tsv --recipe corpora/EMEA/recipe --opus-dir ~/opus --out EMEA.docs.tsv
"""
import argparse

from . import options as opt

HELP = "convert OPUS Moses/XCES downloads or TMX to the doc_id/src/tgt TSV of `split`"


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_argument_group("input (exactly one form)")
    src.add_argument("--recipe", metavar="FILE",
                     help="a corpora/<DOMAIN>/recipe file (with --opus-dir)")
    src.add_argument("--opus-dir", metavar="DIR",
                     help="directory holding the OPUS download named by --recipe")
    src.add_argument("--moses", nargs=2, metavar=("SRC", "TGT"),
                     help="OPUS Moses text files (e.g. EMEA.de-en.de EMEA.de-en.en)")
    src.add_argument("--ids", metavar="FILE",
                     help="the .ids file that goes with --moses")
    src.add_argument("--xces", metavar="FILE",
                     help="OPUS XCES sentence alignment (.xml or .xml.gz)")
    src.add_argument("--src-docs", metavar="DIR|ZIP",
                     help="source-language document XML for --xces (e.g. de.zip)")
    src.add_argument("--tgt-docs", metavar="DIR|ZIP",
                     help="target-language document XML for --xces (e.g. en.zip)")
    opt.add_tmx(src, "becomes the doc_id column", instead_of="--recipe/--moses/--xces",
                doc_prop_dest="doc_prop")
    opt.add_out(p, "TSV file to write", metavar="TSV")
    opt.add_languages(p, "for --tmx")
    p.add_argument("--doc-key", choices=["src", "tgt", "pair"], default=None,
                   help="which document path identifies a document (default: src, or "
                        "the recipe's DOC_KEY)")
    p.add_argument("--doc-regex", metavar="REGEX",
                   help="keep only the part of the document path this regex matches "
                        "(its first group if it has one)")


def run(args: argparse.Namespace) -> int:
    import json
    import os
    import sys

    from ..errors import InputError
    from ..outdir import check_not_input
    from ..data.opus import (ConversionLog, FileRef, convert_recipe, moses_ids_pairs,
                        read_recipe, tmx_pairs, write_tsv, xces_pairs)

    forms = [f for f, given in (("--recipe", args.recipe), ("--moses", args.moses),
                                ("--xces", args.xces), ("--tmx", args.tmx)) if given]
    if len(forms) != 1:
        raise InputError("give exactly one of --recipe, --moses, --xces, --tmx "
                         f"(got {', '.join(forms) or 'none'})")
    out_dir = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(out_dir):
        raise InputError(f"{out_dir}: output directory does not exist")
    inputs = [x for x in (args.ids, args.xces, args.tmx) + tuple(args.moses or ()) if x]
    check_not_input(args.out, inputs)
    doc_key = args.doc_key or "src"
    log = ConversionLog()
    if args.recipe:
        if not args.opus_dir:
            raise InputError("--recipe needs --opus-dir (where the OPUS files are)")
        recipe = read_recipe(args.recipe)
        if args.doc_key:
            recipe["DOC_KEY"] = args.doc_key
        if args.doc_regex:
            recipe["DOC_REGEX"] = args.doc_regex
        log, files = convert_recipe(recipe, args.opus_dir, args.out)
    elif args.moses:
        if not args.ids:
            raise InputError("--moses needs --ids (the OPUS .ids file naming each "
                             "pair's documents)")
        for path in list(args.moses) + [args.ids]:
            if not os.path.exists(path):
                raise InputError(f"{path}: no such file")
        write_tsv(moses_ids_pairs(FileRef(args.moses[0]), FileRef(args.moses[1]),
                                  FileRef(args.ids), doc_key=doc_key,
                                  doc_regex=args.doc_regex, log=log), args.out)
    elif args.xces:
        if not (args.src_docs and args.tgt_docs):
            raise InputError("--xces needs --src-docs and --tgt-docs (the documents' XML)")
        if not os.path.exists(args.xces):
            raise InputError(f"{args.xces}: no such file")
        write_tsv(xces_pairs(args.xces, args.src_docs, args.tgt_docs, doc_key=doc_key,
                             doc_regex=args.doc_regex, log=log), args.out)
    else:
        if not os.path.exists(args.tmx):
            raise InputError(f"{args.tmx}: no such file")
        write_tsv(tmx_pairs(args.tmx, args.src_lang, args.tgt_lang,
                            doc_prop=args.doc_prop, log=log), args.out)
    print(f"nmtfrag opus2tsv: {json.dumps(log.to_json())} -> {args.out}",
          file=sys.stderr)
    return 0
