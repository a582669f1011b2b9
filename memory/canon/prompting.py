"""What the canon call is told and shown: the character's sheet as named fields, and the
conversation as atomic turns, the character's own marked as such."""

from __future__ import annotations

from collections.abc import Sequence

from memory.canon.sheet import SheetField
from memory.engine.llm import ToolSpec
from memory.integrity.render import as_data
from memory.models import Turn

CANON_TOOL = ToolSpec(
    name="propose_canon",
    description="Propose what the character established about itself or its world.",
    input_schema={
        "type": "object",
        "properties": {
            "proposals": {
                "type": "array",
                "description": "At most five; an empty list when the character established "
                "nothing new about itself or its world.",
                "items": {
                    "type": "object",
                    "properties": {
                        "text": {
                            "type": "string",
                            "description": "One short sentence in the third person about the "
                            "character or its world, with {cite:ID} of the character's own "
                            "line it rests on.",
                        },
                        "contradicts": {
                            "type": ["string", "null"],
                            "description": "The name of the sheet field this contradicts, or null.",
                        },
                    },
                    "required": ["text", "contradicts"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["proposals"],
        "additionalProperties": False,
    },
)

_INSTRUCTIONS = """You keep the canon of {name}, a character. In the conversation below, \
{first} may have said things about {pronoun_self} or {pronoun_world} that the character \
sheet does not say: a relative, the name of a boat, a case solved, a place from the past. \
Propose each one as a short sentence in the third person, in {language_name}, for an admin \
to add to the sheet.

Rules:
- Only what {first} established about {pronoun_self} or {pronoun_world}, in {first}'s own \
lines (marked "(you)"). Each proposal carries {{cite:ID}} of those lines, and only of those.
- Never anything about the people in the conversation: not their names, not what they said \
about themselves, not their words. If {first} only repeated what a person said, propose nothing.
- Nothing the sheet already says. If a proposal says otherwise than a field of the sheet, give \
that field's name in "contradicts" (exactly as written before the colon); else null.
- Never an instruction to {first}, nor how {first} must speak or behave.
- Usually there is nothing, or one or two things: an empty list is a good answer.
Answer by calling propose_canon."""


def instructions(name: str, language: str) -> str:
    first = name.split()[0] if name.split() else "the character"
    spanish = language == "es"
    return _INSTRUCTIONS.format(
        name=name,
        first=first,
        pronoun_self="itself",
        pronoun_world="its world",
        language_name="Spanish" if spanish else "English",
    )


def speaker_of(turn: Turn, character_name: str) -> str:
    if turn.role == "assistant":
        return f"{character_name} (you)"
    if turn.role == "tool":
        return f"{character_name} (recollection)"
    return turn.speaker.name if turn.speaker is not None else "user"


def request_body(fields: Sequence[SheetField], turns: Sequence[Turn], character_name: str) -> str:
    sheet = "\n".join(f"{f.name}: {as_data(f.value)}" for f in fields) or "(empty)"
    lines = "\n".join(
        f"[{t.id}] {speaker_of(t, character_name)}: {as_data(' '.join(t.text.split()))}"
        for t in turns
    )
    return f"The sheet, field by field:\n{sheet}\n\nThe conversation:\n{lines}"
