"""Corpora in and out: reading and checking parallel text, Moses tokenisation, the model's
BPE, TMX/OPUS conversion, document-level splits, corpus statistics, seeded samples."""
