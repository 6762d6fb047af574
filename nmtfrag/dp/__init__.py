"""Differential privacy for NMT adaptation: a DP vocabulary (Hoory et al. 2021), DP-SGD
fine-tuning of fairseq Transformers with opacus, and privacy accounting (RDP / PRV).

Modules: `vocab` (DP histogram → BPE codes, ε_V), `accounting` (ε_T, σ for a target ε,
ε_V + ε_T), `schedule` (increasing batch sizes), `fairseq_opacus` (the runtime fixes
opacus needs on fairseq's Transformer), `sgd` (the DP fine-tuning loop), `cli_args`
(options shared with `nmtfrag finetune --dp`).
"""
