"""The decision study (`nmtfrag study`): every approach on one footing, from one config.

config   the TOML config: read and checked before anything runs
plan     each cell's steps as `nmtfrag` command lines (extract, finetune, evaluate, audit)
record   the settings recorded per cell; a changed one is refused
runner   runs the steps (resumable, N cells side by side, one lock per study)
child    a step that dies with the study that started it
status   where each cell stands
report   the report: BLEU kept × what leaks × ε, rewritten after every finished cell
"""
