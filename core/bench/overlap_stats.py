"""What the draft-while-the-target-streams overlap did over a run of passes, for the bench commands' JSON."""

from __future__ import annotations

from dataclasses import dataclass

from core.decoding.methods.step import PassStats


@dataclass
class OverlapTally:
    """Per pass means of: draft forwards on the critical path (the search the target waits for) and under
    the target's stream (the shadow search's); the share of passes whose search started from a kept subtree,
    and the kept subtree's expanded nodes in those passes; and the critical-path forwards of the passes that started
    from a kept subtree and of those that did not, apart (what the speed model prices a keep by)."""

    passes: int = 0
    critical: int = 0
    shadow: int = 0
    kept_passes: int = 0
    kept_nodes: int = 0
    kept_critical: int = 0

    def add(self, stats: PassStats) -> None:
        self.passes += 1
        self.critical += stats.draft_forwards
        self.shadow += stats.shadow_forwards
        if stats.kept_nodes > 0:
            self.kept_passes += 1
            self.kept_nodes += stats.kept_nodes
            self.kept_critical += stats.draft_forwards

    def summary(self) -> dict[str, float]:
        passes = max(self.passes, 1)
        fresh = self.passes - self.kept_passes
        return {
            "critical_path_draft_forwards": self.critical / passes,
            "shadow_draft_forwards": self.shadow / passes,
            "kept_subtree_share": self.kept_passes / passes,
            "kept_subtree_nodes": self.kept_nodes / self.kept_passes if self.kept_passes else 0.0,
            "critical_path_draft_forwards_kept": self.kept_critical / self.kept_passes if self.kept_passes else 0.0,
            "critical_path_draft_forwards_fresh": (self.critical - self.kept_critical) / fresh if fresh else 0.0,
        }
