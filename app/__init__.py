"""SpecExec Desktop: the Qt front end. It never imports torch; the engine runs in its own process and is
reached through `core.engine.client` / `core.engine.protocol` only."""

__version__ = "0.1.0"
