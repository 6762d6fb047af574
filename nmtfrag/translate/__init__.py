"""Translation and scoring: the fairseq and CTranslate2 engines behind one batch
interface, and `evaluate` (SacreBLEU, chrF, paired bootstrap)."""
