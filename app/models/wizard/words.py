"""Hardware and fit predictions in plain words for people (no Qt): "NVIDIA GeForce RTX 4090, 24.0 GB; 62.7 GB RAM;
PCIe 4.0 x16; 466.0 GB free on disk", "about 5 words per second". The wizard and the model manager show these."""

from __future__ import annotations

from dataclasses import dataclass

from core.hardware.description import HardwareDescription
from core.models.fit import PairFit, Recommendation
from app.chat.message_words import WORDS_PER_TOKEN
from core.planning.sizes import format_bytes

FIT_WORDS = {"fits": "Fits this computer", "tight": "Fits, just", "no": "Does not fit"}
MEASURED_HERE = ", measured on this computer"  # after a speed measured here (the done page drops it)


def size_words(nbytes: float) -> str:
    """A size of a file, a download or memory, by the one rule the command line follows too
    (core.planning.sizes.format_bytes: "42.4 GB", "98.2 MB"), so the wizard, `specexec models ...` and
    `specexec hw` agree; a negative count (a stale estimate) reads as 0 B."""
    return format_bytes(max(nbytes, 0))


def hardware_summary(hw: HardwareDescription) -> str:
    """One line: GPU and its memory; RAM; the PCIe link and the measured copy rate when there is one; free disk."""
    parts = []
    gpu = hw.best_gpu
    if gpu is None:
        parts.append("No NVIDIA graphics card (models run on the processor, slowly)")
    else:
        parts.append(f"{gpu.name}, {size_words(gpu.vram_total_bytes)}")
    parts.append(f"{size_words(hw.ram.total_bytes)} RAM")
    if gpu is not None and gpu.pcie.gen_max:
        link = f"PCIe {gpu.pcie.gen_max}.0 x{gpu.pcie.width_max or '?'}"
        if gpu.h2d_bytes_per_second:
            link += f", measured {gpu.h2d_bytes_per_second / 1e9:.1f} GB/s"
        parts.append(link)
    if hw.disk.free_bytes is not None:
        parts.append(f"{size_words(hw.disk.free_bytes)} free on disk")
    return "; ".join(parts)


def speed_words(fit: PairFit) -> str:
    """ "about 5 words per second", "…, measured on this computer" when it was, or why there is no figure. The
    tokens per second are in `technical_lines`, one click away (issue 42: plain words first)."""
    if fit.tokens_per_second is None:
        return "speed unknown: it does not fit"
    words = fit.tokens_per_second * WORDS_PER_TOKEN
    measured = MEASURED_HERE if fit.rate_source.startswith("measured") else ""
    if words > 100:
        return f"more than 100 words per second{measured}"
    figure = f"{words:.0f}" if words >= 2 else f"{words:.1f}"
    unit = "word" if figure == "1" else "words"
    return f"about {figure} {unit} per second{measured}"


# What a model of this size is good for, by the parameters one token goes through (an MoE's routed experts).
QUALITY_WORDS = (
    (1e9, "A tiny demo model: it answers at once, but often wrongly"),
    (10e9, "A small model: fine for simple questions and short texts"),
    (40e9, "A strong model: good answers to most questions, code and writing"),
    (float("inf"), "A very strong model: among the best that run on a home computer"),
)


def quality_words(fit: PairFit) -> str:
    """What a person gains with this model, in one sentence."""
    shape = fit.pair.target.shape
    parameters = shape.active_parameters if shape is not None else 0
    return next(words for limit, words in QUALITY_WORDS if parameters < limit) + "."


def technical_lines(fit: PairFit) -> list[str]:
    """The pair's details, for people who want them (one click away): the models, how they are stored, how the
    speed figure was made."""
    pair = fit.pair
    lines = [pair.summary]
    if fit.pair.draft is not None and not pair.target.is_builtin:
        lines.append(f"Draft model: {pair.draft_label} ({pair.draft.repo}), {pair.draft.quantization}.")
    lines.append(
        f"Model: {pair.target.repo or pair.name}, {pair.target.quantization}; "
        f"{fit.resident_layers or 0} of {fit.total_layers} layers kept on the graphics card."
    )
    per_pass = f"{fit.tokens_per_pass:.1f} tokens per pass of the big model"
    budget = f" with {fit.budget}-token trees" if fit.budget else ""
    rate = f"{fit.tokens_per_second:.1f} tokens per second, " if fit.tokens_per_second is not None else ""
    lines.append(f"Speed: {rate}{per_pass}{budget} ({fit.acceptance_source}); {fit.rate_source}.")
    kept = fit.planned_context  # what the fit was priced with: the app's setting, at most the model's limit
    lines.append(
        f"Memory: needs {size_words(fit.host_bytes_needed)} of RAM and keeps {kept:,} tokens of a chat in mind"
        + (
            f" (the model reads up to {pair.context_length:,}: a longer context, under Settings, takes more memory)."
            if pair.context_length > kept
            else "."
        )
    )
    return lines


def disk_words(fit: PairFit, free_bytes: int | None) -> str | None:
    """Why the download would not fit on the drive that holds the models, or None when it does (or where the
    free space is unknown). The hardware can't change; a full drive can, so the pair is still offered."""
    if fit.disk_ok is not False or free_bytes is None:
        return None
    return (
        f"Its download needs {size_words(fit.pair.download_bytes)} on the drive that keeps the models, and "
        f"{size_words(free_bytes)} is free there: free some space, or keep models on another drive."
    )


def download_words(fit: PairFit) -> str:
    size = fit.pair.download_bytes
    return "built-in, nothing to download" if size == 0 else f"{size_words(size)} to download"


def licence_words(fit: PairFit) -> str:
    pair = fit.pair
    gated = " · needs a free Hugging Face account and accepting the licence" if pair.gated else ""
    return f"Licence: {pair.licence}{gated}"


def eta_words(seconds: float | None) -> str:
    if seconds is None:
        return "time left: working it out"
    seconds = int(seconds)
    if seconds < 60:
        return f"about {seconds} s left"
    if seconds < 3600:
        return f"about {seconds // 60} min left"
    return f"about {seconds // 3600} h {seconds % 3600 // 60} min left"


@dataclass(frozen=True)
class RecommendationWords:
    """The first page's card: the model's name as its title, what it is good for and how fast it should
    answer, then how many models fit (muted)."""

    name: str
    advice: str
    count: str


def recommendation_words(recommendation: Recommendation) -> RecommendationWords:
    """What the machine means for the choice: the model we recommend, what it is good for, how fast it
    should answer. The counts leave out the SpecExec paper's calibration pair, which the next page does not
    offer (Llama 2 70B, kept to check the speed model)."""
    offered = [fit for fit in recommendation.pairs if not fit.pair.calibration]
    best = next((fit for fit in offered if fit.pair.id == recommendation.recommended), offered[0])
    fitting = sum(1 for fit in offered if fit.fit != "no")
    return RecommendationWords(
        best.pair.name,
        f"{quality_words(best)} Here it should write {speed_words(best)}.",
        f"{fitting} of the {len(offered)} models fit this computer; the next page shows them all.",
    )
