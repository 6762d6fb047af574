"""Fine-tuning: the job (what trains on what, from which model, into which OUT), its
training data, which parameters train (all, biases, LoRA), and fairseq's trainer."""
