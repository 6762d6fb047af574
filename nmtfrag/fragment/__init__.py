"""Fragmentation: word alignment (eflomal, on the corpus or under a public model),
symmetrisation, phrase pairs consistent with it, the shuffled sample, the release."""
