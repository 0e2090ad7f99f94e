"""Decoding methods as sibling step generators: each yields one Step per target pass."""
