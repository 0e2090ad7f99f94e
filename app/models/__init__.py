"""Models: the model manager, what a pair choice means on disk, downloads, and the first-run wizard."""
