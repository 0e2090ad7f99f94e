"""Decoding: sampling, the draft search and forward, verification, caches' bookkeeping, constraints,
the step generators (methods/) and the automatic choice of method and budget (autotune/)."""
