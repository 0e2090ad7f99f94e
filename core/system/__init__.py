"""The process's surroundings: environment variables, folders, threads, caches on disk, secrets."""
