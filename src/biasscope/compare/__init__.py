"""Claims about two runs or about one run's checkpoints that a reviewer accepts: equivalence
within a margin (``biasscope compare``), power (``biasscope power``)."""
