"""The chat screen: the conversation view, its header, the composer, and the logic between them and the engine."""
