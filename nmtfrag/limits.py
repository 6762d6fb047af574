"""The largest value each size option accepts, and why: every bound here is one a run
can meet, checked while parsing (one `error:` line naming the option, exit 2) and again
by the library function that takes the value.

Why: a size option without a bound reached the code that allocates or loops by it.
`extract --max-len 1000000000` died with a segfault (exit 139) after 8 GB: the compiled
extractor (nmtfrag/fragment/_phrases_fast.pyx) keeps a list of n_src × max-len slots per sentence
pair (8 bytes each: 800 MB for a 100-word sentence at --max-len 1,000,000), and that
product overflows a C int at 10^9. `audit canaries insert --count 50000 --repeats 1,10` looped for ever
(its record numbers ran out) and `--repeats 1,1000000000` tried to hold 10^9 line numbers.

Measured on a busy 2-core machine (peak RSS of the whole command, /usr/bin/time):

* MAX_PHRASE_LEN: `extract` on corpora/demo/train.* (400 pairs, --seed 1): 55 MB and
  3 s at --max-len 4 (the default), 57 MB and 3 s at 100 (the bound); no sentence pair
  of that corpus has a side over 20 words, so 100 adds nothing there. A long-sentence
  worst case, 50 pairs of 200 words aligned monotonically (--alignments): 752,500
  occurrences, 245 MB and 3 s at 100 (39,700 occurrences, 45 MB at 4); the occurrences,
  and the work dir's shuffle buckets on disk, grow with words × max-len. 100 words is
  generous: the paper releases pairs of at most 4 and 7 words, and a pair longer than
  a sentence is the sentence (--allow-whole-sentences decides on those). `audit
  reconstruct --max-len` takes the same bound (its n-grams run to 2 × max-len).
* MAX_UNIT_CAP: the Policy Gaussian's threshold (nmtfrag.dp.histogram.policy_threshold)
  is a maximum over t = 1 … K; at K = 100,000 it takes 4.6 s (K = 10^9: about 13 hours,
  extrapolated). The counts' noise grows with √K: at K = 100,000 and ε = 1 a pair needs
  about 9,400 units to clear the threshold, so larger caps release nothing anyway.
* MAX_BEAM: fairseq takes min(beam, vocabulary − 1) hypotheses per sentence; on
  generic-deen-small (20k words) `evaluate --beam 1000000000` asked for 4.9 GB at once
  on 5 EMEA sentences and died. --beam 1000 on those 5 sentences: 5.7 GB, 200 s; --beam
  100: 1.1 GB, 65 s. Memory grows with beam × sentences per batch: give a large beam a
  small --batch-size. 1,000 is the largest beam of the beam-size studies (Koehn &
  Knowles 2017; Stahlberg & Byrne 2019).
* MAX_BOOTSTRAP_SAMPLES: sacrebleu's paired bootstrap holds samples × sentences
  statistics: on EMEA test (2,001 sentences) 1,000 samples took 0.3 GB and 3 s, 10,000
  samples 1.7 GB and 13 s (100,000 would need about 17 GB).
* MAX_CANARIES: canaries get distinct 5-digit record numbers (10000 … 99999), so at most
  90,000 of them (count × repeat values + unseen) can exist.
* MAX_CANARY_LINES: inserted canary lines (count × the sum of --repeats), into a 60-line
  corpus: 2,000,020 lines took 0.28 GB and 6 s, 10,000,000 (the bound) 1.2 GB and 34 s,
  and wrote 1.4 GB.
"""
from __future__ import annotations

MAX_PHRASE_LEN = 100  # extract --max-len/--min-len, audit reconstruct --max-len (words)
MAX_UNIT_CAP = 100_000  # extract --unit-cap K (distinct phrase pairs counted per unit)
MAX_BEAM = 1000  # evaluate/translate --beam, audit exposure --beam
MAX_BOOTSTRAP_SAMPLES = 10_000  # evaluate --bootstrap-samples
MAX_CANARIES = 90_000  # audit canaries insert: every canary, planted or unseen
MAX_CANARY_LINES = 10_000_000  # audit canaries insert: every inserted canary line
