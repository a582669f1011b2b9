"""`companion characters lint`: where a sheet breaks the rules of the seed article."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from cards.character import Character
from memory.engine.lore import DESCRIPTION_CHARS, MAX_HEADINGS, headings, render_lore_index
from memory.engine.prompt import render_character_sheet
from memory.engine.tokens import TokenEstimator

SHEET_MIN_TOKENS = 200
SHEET_MAX_TOKENS = 400

# A rule that only forbids ("never…", "no…") is followed worse than one that says what to do.
_NEGATIVE_START = re.compile(
    r"^\s*(no|nunca|jam[aá]s|evita|sin|prohibido|don'?t|do not|never|avoid|no one|not)\b",
    re.IGNORECASE,
)


# Words that make a sheet read as meant for adults, in English and Spanish. A reminder for the
# admin who forgot `rating: mature`, not a filter: a sheet can be for adults without them, and
# the rating, not this list, decides where a character speaks.
MATURE_WORDS = re.compile(
    r"(?<!\w)(nsfw|18\+|explicit\w*|expl[ií]cit[oa]s?|erotic\w*|er[oó]tic[oa]s?|sexual\w*|"
    r"sexy|lewd|nudes?|naked|nudity|desnud[oa]s?|desnudez|porn\w*|fetish\w*|fetiches?|"
    r"adults only|solo para adultos)(?!\w)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class LintWarning:
    character_id: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.character_id}: {self.field}: {self.message}"


def lint_character(
    character: Character,
    tokens: TokenEstimator | None = None,
    languages: Sequence[str] = (),
) -> list[LintWarning]:
    """What breaks the rules of a good sheet; `languages` are those the bot speaks to users
    in, in each of which the greeting should be written."""
    tokens = tokens or TokenEstimator()
    found: list[LintWarning] = []

    def warn(field: str, message: str) -> None:
        found.append(LintWarning(character.id, field, message))

    sheet = tokens.count(render_character_sheet(character))
    if sheet > SHEET_MAX_TOKENS:
        warn(
            "sheet",
            f"about {sheet} tokens, over the {SHEET_MAX_TOKENS} of a good sheet by "
            f"{sheet - SHEET_MAX_TOKENS}: move biography and history out of it",
        )
    elif sheet < SHEET_MIN_TOKENS:
        warn("sheet", f"about {sheet} tokens, under {SHEET_MIN_TOKENS}: the voice may be thin")
    if not 3 <= len(character.traits) <= 5:
        warn("traits", f"{len(character.traits)} traits; keep 3 to 5")
    if not 2 <= len(character.speech_rules) <= 3:
        warn("speech_rules", f"{len(character.speech_rules)} rules; keep 2 to 3")
    for index, rule in enumerate(character.speech_rules):
        if _NEGATIVE_START.match(rule):
            warn(
                f"speech_rules.{index}",
                f"'{rule}' is phrased only negatively; say what the character does instead",
            )
    if not character.does_not_know:
        warn(
            "does_not_know",
            "no list of what the character does not know; it is the field "
            "that prevents most contradictions",
        )
    if not character.opening_messages:
        warn("opening_messages", "no pinned opening message to set the tone and the scene")
    else:
        written = character.opening_messages[0].languages(character.language)
        for language in (x for x in languages if x not in written):
            warn(
                "opening_messages.0.text",
                f"no greeting in '{language}': a user speaking it is greeted in "
                f"'{character.language if character.language in written else written[0]}'; "
                f"write the text as {{{', '.join(f'{x}: ...' for x in (*written, language))}}}",
            )
    missing = [k for k in ("age", "trade", "place") if getattr(character.identity, k) is None]
    if missing:
        warn("identity", f"no {', '.join(missing)}: the prompt leaves them out until you add them")
    if character.rating != "mature" and (word := _reads_mature(character)):
        warn(
            "rating",
            f"the sheet reads as meant for adults ('{word}') but the character is rated "
            "general, so it speaks in every chat: add `rating: mature` if it is",
        )
    if not character.journey and not character.journey_reason.strip():
        warn(
            "journey",
            "the journey is off without a reason: the character will not remember the story "
            "of its conversations, only facts; set journey_reason, or remove `journey: false`",
        )
    if not character.canon and not character.canon_reason.strip():
        warn(
            "canon",
            "canon proposals are off without a reason: what the character improvises about "
            "itself is never proposed for its sheet; set canon_reason, or remove `canon: false`",
        )
    return found


def _reads_mature(character: Character) -> str | None:
    """The first word of MATURE_WORDS in what the character says and is (sheet, openings,
    the card's tags), or None."""
    tags = character.card_passthrough.get("tags")
    texts = [
        render_character_sheet(character),
        *(text for m in character.opening_messages for text in m.languages_texts()),
        *(t for t in (tags if isinstance(tags, list) else []) if isinstance(t, str)),
    ]
    found = next((m for m in map(MATURE_WORDS.search, texts) if m), None)
    return found.group(0) if found else None


def lint_lore(
    character: Character, cap_tokens: int, tokens: TokenEstimator | None = None
) -> tuple[list[str], list[LintWarning]]:
    """The lore's margins (report lines) and what breaks the limits (warnings)."""
    tokens = tokens or TokenEstimator()
    if not character.lore:
        return [], []
    index = render_lore_index(character.lore, character.language)
    sizes = {page.slug: tokens.count(page.content) for page in character.lore}
    largest = max(sizes, key=lambda slug: sizes[slug])
    report = [
        f"{character.id}: lore index {tokens.count(index)} tokens for {len(sizes)} page(s), "
        "inside the cached sheet",
        f"{character.id}: largest page '{largest}' {sizes[largest]} tokens of the "
        f"{cap_tokens} cap ({sizes[largest] / cap_tokens:.0%})",
    ]
    found = []
    for page in character.lore:
        where = f"lore.{page.slug}"
        if sizes[page.slug] > cap_tokens:
            found.append(
                LintWarning(
                    character.id,
                    where,
                    (
                        f"{sizes[page.slug]} tokens, over the {cap_tokens} cap by "
                        f"{sizes[page.slug] - cap_tokens}: read_lore will cut it; split the page"
                    ),
                )
            )
        count = len(headings(page.content))
        if count > MAX_HEADINGS:
            found.append(
                LintWarning(
                    character.id,
                    where,
                    (f"{count} '## ' headings; the index shows the first {MAX_HEADINGS}"),
                )
            )
        if len(page.description) > DESCRIPTION_CHARS:
            found.append(
                LintWarning(
                    character.id,
                    where,
                    (
                        f"description of {len(page.description)} characters is cut to "
                        f"{DESCRIPTION_CHARS} in the index"
                    ),
                )
            )
    return report, found
