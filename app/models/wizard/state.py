"""What the wizard's pages share (no Qt): the machine, the prediction, the choice, where models go."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from app.models.choice import installed_pairs, pair_paths
from app.settings.schema import AppSettings
from core.hardware.description import HardwareDescription
from core.models.catalog import Catalog, load_catalog
from core.models.fit import PairFit, Recommendation, recommend


@dataclass(frozen=True)
class Prediction:
    hardware: HardwareDescription
    recommendation: Recommendation
    installed: set[str]


@dataclass
class WizardState:
    settings: AppSettings  # the app's settings; the wizard returns a copy with the chosen pair
    models_dir: Path
    catalog: Catalog = field(default_factory=load_catalog)
    hardware: HardwareDescription | None = None
    recommendation: Recommendation | None = None
    chosen: PairFit | None = None
    installed: set[str] = field(default_factory=set)

    def probe(self) -> "Prediction":
        """Blocking (run it off the GUI thread): read the machine, then predict every pair."""
        from core.hardware.probe import describe_hardware

        return self.predict(describe_hardware())

    def predict(self, hw: HardwareDescription) -> "Prediction":
        """Blocking: the fit of every catalog pair on `hw`, and which pairs are already downloaded. Changes
        nothing here: the GUI thread hands the result to `apply`."""
        budget = self.settings.tree_budget or None  # 0: the engine chooses (predicted as the fit's automatic budget)
        context = self.settings.context_length or None  # 0: automatic; a pair that keeps less loads with its limit
        recommendation = recommend(self.catalog, hw, budget, context_length=context)
        return Prediction(hw, recommendation, set(installed_pairs(self.catalog, self.models_dir)))

    def apply(self, prediction: "Prediction") -> HardwareDescription:
        self.hardware, self.recommendation, self.installed = (
            prediction.hardware,
            prediction.recommendation,
            prediction.installed,
        )
        return prediction.hardware

    def keep_models_in(self, folder: Path) -> str | None:
        """Keep models in `folder` from now on (the chosen settings carry it, and the running app looks there):
        why it cannot be, in words, or None when done. Blocking but quick (a write check, then the fit of every
        pair again with the new drive's free space)."""
        from app.system.models_folder import apply_models_folder, folder_problem

        problem = folder_problem(str(folder))
        if problem is not None:
            return problem
        self.settings = replace(self.settings, models_folder=str(folder))
        self.models_dir = folder
        apply_models_folder(str(folder))
        self.measure_disk_again()
        return None

    def measure_disk_again(self) -> None:
        """Every pair's fit again with the free space of the drive that keeps the models now (another folder
        was picked, or a download found less room than the first look did). Blocking but quick."""
        from core.hardware.probe import disk_at

        if self.hardware is not None:
            self.apply(self.predict(replace(self.hardware, disk=disk_at(self.models_dir))))

    def chosen_paths(self) -> tuple[str, str]:
        assert self.chosen is not None, "no pair chosen"
        return pair_paths(self.catalog, self.chosen.pair.id, self.models_dir)

    def needs_download(self) -> bool:
        return self.chosen is not None and self.chosen.pair.id not in self.installed
