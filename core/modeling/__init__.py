"""The model wrapper and what a forward needs: attention, KV caches, tree masks, model formats and files."""
