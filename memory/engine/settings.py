"""The engine's settings and its one fixed answer, apart from the classes that use them so that
each collaborator of the Companion can name them without importing the Companion."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from memory.engine.prompt import Budgets

APOLOGY = {
    "es": "Perdona, se me ha ido el hilo un momento. ¿Me lo repites dentro de un rato?",
    "en": "Sorry, I lost my train of thought for a moment. Could you say that again in a bit?",
}


@dataclass(frozen=True)
class EngineSettings:
    budgets: Budgets = field(default_factory=Budgets)
    window_keep_turns: int = 12
    window_trigger_turns: int = 32
    inactivity_timeout: timedelta = timedelta(minutes=30)
    max_reply_tokens: int = 600
    max_sessions_in_ram: int = 2000
    lore_page_cap_tokens: int = 1500
    scene_max_replies: int = 2  # character lines per people's message in a scene
    scene_seed: int | None = None  # who answers a message naming nobody, repeatably
