"""Every SPECEXEC_* environment variable, declared once (as vLLM's envs.py does): its name, and what it does.

Modules read a variable through its name here, so a search for the name finds every place that obeys it.
Nothing here reads the environment at import: each reader decides when (the engine process inherits them).
"""

from __future__ import annotations

# What the engine runs
OVERLAP_ENV = "SPECEXEC_OVERLAP"
"""0 turns the draft-while-the-target-streams overlap off (core.decoding.methods.specexec: no shadow search, each
search starts from its root alone), 1 turns it on everywhere (on a CPU it then runs in sequence, for tests and
measurements); unset: on where the draft has a stream of its own (CUDA). The commands' --no-overlap wins."""
