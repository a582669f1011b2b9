"""One replayed scene of bench/scene.py, as its report and findings read it: the script, every
request the model was asked, every line the characters said, and the memory the scene left."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.scene_llm import SceneRequest
from bench.scene_script import SceneScript
from memory.models import Fact


@dataclass(frozen=True)
class SpokenLine:
    message: int  # the human message whose turn it belongs to
    character: str
    text: str
    ok: bool


@dataclass
class SceneRun:
    script: SceneScript
    requests: list[SceneRequest]
    lines: list[SpokenLine]
    engine: dict[str, Any]
    facts: list[Fact] = field(default_factory=list)  # the group facts the extraction stored
    speakers: dict[int, int | None] = field(default_factory=dict)  # turn id -> person id
    person_ids: dict[str, int] = field(default_factory=dict)
    rejections: list[str] = field(default_factory=list)
    foreign_attempts: int = 0
    chronicles: dict[str, Any] = field(default_factory=dict)  # the story of the scene's figures
