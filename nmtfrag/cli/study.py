"""The decision study: every approach on one footing, from one config file.

  nmtfrag study run CONFIG --out DIR [--jobs N] [--cell NAME …] [--wait]
      run (or continue) every cell: the baseline first (its report before any training),
      then the releases, then the cells N at a time; finished steps are skipped, a killed
      training resumes from its saved state, a changed setting of a recorded cell is
      refused; the report is rewritten after every finished cell. A run into a DIR
      another run writes is refused, or with --wait starts when that one ends
  nmtfrag study status CONFIG --out DIR
      every cell's state, CPU time so far and progress against its cap or plan
  nmtfrag study report CONFIG --out DIR
      rewrite DIR/report/ (report.md, report.json, privacy_utility.png) from what is done
  nmtfrag study export CONFIG --out DIR --to SEED --cell NAME […]
      write SEED, a new study directory holding what another machine needs to run the
      named cells (DIR's record, the owner's shared inputs, the finished baseline and
      releases), so it spends its time training; run them there with `study run --out
      SEED`, then import them here. SEED/owner holds the owner's training pairs
  nmtfrag study import CONFIG --out DIR --from OTHER --cell NAME […]
      copy finished cells of study OTHER (e.g. run on a GPU machine) into DIR, if their
      recorded settings equal DIR's and both baselines decoded the test set alike; the
      report marks them and names the machine they ran on

CONFIG is a TOML file; corpora/demo/study.toml is a commented example of every key, and
corpora/EMEA/study.toml and corpora/GNOME/study.toml are the project's studies. Paths in
it may use ${VAR} from the environment, e.g.
  MODELS=~/models DATA=~/data nmtfrag study run corpora/EMEA/study.toml --out runs/emea
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import arg_types as ct
from . import options as opt

if TYPE_CHECKING:
    from ..study.config import StudyConfig

HELP = "run a whole comparison (every approach, one footing) from a config file"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="study_command", metavar="ACTION", parser_class=type(p))
    sub.required = True
    for name, text in (("run", "run or continue the study"),
                       ("status", "where every cell stands (starts nothing)"),
                       ("report", "rewrite the report from the finished cells"),
                       ("export", "write a new study directory to run cells elsewhere"),
                       ("import", "copy finished cells of another study directory here")):
        s = sub.add_parser(name, help=text, description=text)
        s.add_argument("config", metavar="CONFIG", help="the study's TOML config file")
        opt.add_out(s, "the study directory (created by the first run)")
        if name == "run":
            s.add_argument("--jobs", type=ct.positive_int, default=None, metavar="N",
                           help="cells trained side by side (default: [machine] jobs)")
            s.add_argument("--threads", type=ct.positive_int, default=None, metavar="N",
                           help="CPU threads in all, divided among the jobs (default: "
                                "[machine] threads, else every core)")
            s.add_argument("--device", choices=("cpu", "cuda"), default=None,
                           help="where cells train and score (default: [machine] device)")
            s.add_argument("--decode-device", choices=("cpu", "cuda"), default=None,
                           help="where evaluate decodes (default: [machine] decode_device, "
                                "else --device); e.g. cpu where CTranslate2 lacks its CUDA "
                                "libraries")
            s.add_argument("--cell", action="append", metavar="NAME",
                           help="run only this cell (repeatable; the baseline always runs; "
                                "cells run in the config's order, whatever the order given "
                                "here)")
            s.add_argument("--wait", action="store_true",
                           help="while another run writes DIR, wait for it to end instead "
                                "of refusing: a queue in an order of one's own is `study "
                                "run --wait --cell A; study run --wait --cell B`")
        if name == "import":
            s.add_argument("--from", dest="source", required=True, metavar="OTHER",
                           help="the study directory the cells ran in (same config)")
            s.add_argument("--cell", action="append", required=True, metavar="NAME",
                           help="a finished cell of OTHER to import (repeatable)")
        if name == "export":
            s.add_argument("--to", required=True, metavar="SEED",
                           help="the new study directory to write (must not exist); it "
                                "holds the owner's training pairs: move it only to a "
                                "machine the owner trusts")
            s.add_argument("--cell", action="append", required=True, metavar="NAME",
                           help="a cell to run there, not finished here (repeatable)")
        if name == "status":
            s.add_argument("--json", action="store_true", help="the records as JSON")


def with_machine(config: StudyConfig, device: str | None,
                 decode_device: str | None) -> StudyConfig:
    """The config with the command line's machine settings (never part of a cell's)."""
    import dataclasses

    m = config.machine
    m = dataclasses.replace(m, device=device or m.device,
                            decode_device=decode_device or m.decode_device)
    return dataclasses.replace(config, machine=m)


def read_finetune_argv(argv: Sequence[str]) -> tuple[argparse.Namespace, Any]:
    """A finetune command line as the command reads it: its options, and their DPConfig
    under --dp (else None). A study checks an adopted run against it."""
    from . import build_parser, dp_options

    args = build_parser().parse_args(list(argv))
    return args, (dp_options.config_from_args(args) if args.dp else None)


def run(args: argparse.Namespace) -> int:
    from ..study.config import read_config, read_config_for

    if args.study_command in ("status", "report"):  # they start nothing: DIR's records
        from ..study.record import read_record

        read_record(args.out)  # "not a study directory" before a missing ${VAR}
        config = read_config_for(args.config, args.out)
    else:
        config = read_config(args.config)
    if args.study_command == "run":
        from ..study.runner import run_study

        config = with_machine(config, args.device, args.decode_device)
        return run_study(config, args.out, jobs=args.jobs, threads=args.threads,
                         cells=args.cell, read_argv=read_finetune_argv, wait=args.wait)
    if args.study_command == "status":
        import json

        from ..study.record import read_record
        from ..study.status import render, study_status

        read_record(args.out)
        holder, rows = study_status(config, args.out)
        print(json.dumps({"running_pid": holder, "cells": rows}, indent=1) if args.json
              else render(args.out, holder, rows))
        return 0
    if args.study_command == "export":
        from ..study.transfer import export_seed

        for line in export_seed(config, args.out, args.to, list(dict.fromkeys(args.cell))):
            print(line)
        return 0
    if args.study_command == "import":
        from ..study.report import write_report
        from ..study.transfer import import_cells

        for line in import_cells(config, args.out, args.source, list(dict.fromkeys(args.cell))):
            print(line)
        write_report(config, args.out)
        return 0
    from ..study.report import run_report

    print(run_report(config, args.out))
    return 0
