"""Differential privacy for NMT adaptation: a DP vocabulary (Hoory et al. 2021), DP-SGD
fine-tuning of fairseq Transformers with opacus, and privacy accounting (RDP / PRV).

Modules: `engine` (the façade: `dp_finetune(job, DPConfig)`) over `config` (DPConfig and
its checks), `rates` (the rate policy: a public rate q, or a logical batch over the DP
count), `planning` (the DP count, the steps and σ), `workers` (the model, the step log,
one or `world_size` spawned processes) and `records` (the certificate and the
manifests); `sgd` (the DP fine-tuning
loop), `clipping` and `fairseq_opacus` (per-example gradients and the runtime fixes opacus
needs on fairseq's Transformer), `accounting` (ε_T, σ for a target ε, composition per
unit), `unit_count` (the DP count ñ), `schedule` (increasing batch sizes), `resume` and
`simulate` (resumable runs; simulations and controls, not private: `RunMode`), `vocab` and
`histogram` (DP histogram → BPE codes, ε_V), `phrase_release` (the DP set union of
`extract --dp`), `certificate` (read and check privacy.json; plan ε), `cli_args` (the
options of `nmtfrag finetune --dp` and the DPConfig they build).
"""
