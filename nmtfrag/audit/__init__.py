"""Confidentiality audits: how much of a corpus can be rebuilt from a release, and how
much a trained model gives planted secrets away.

- `reconstruct`: the attack on a phrase-pair release (it reads only the release), in a
  conservative and a greedy mode (`greedy`: the greedy mode's guesses);
- `rebuilt`: the rule deciding which corpus sentences the attack's output rebuilds;
- `reconstruction_score`: scores the attack's chains against the original corpus;
- `reconstruction_report`: its report.md, both modes side by side;
- `canaries`: plants synthetic sentence pairs carrying random secrets in a corpus;
- `exposure`: exposure (Carlini et al. 2019) and verbatim extraction of those secrets;
- `compare`: one report putting every approach side by side (BLEU × leakage × ε);
  `compare_notes`: the sentences under its table; `compare_reference`: the baseline
  and full-sentence runs every other is measured against.
"""
