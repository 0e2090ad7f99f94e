"""The first-run wizard (one module per page) and the plain-words helpers it shares with the model manager."""
