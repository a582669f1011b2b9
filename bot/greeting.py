"""Telegram's /start, every user's first message: the character's pinned greeting."""

from __future__ import annotations

from bot.answers import Answer, Caller
from bot.texts import pick_language, text
from cards.character import Character, opening_messages_for


def greeting(character: Character, caller: Caller) -> Answer | None:
    """The greeting in the caller's language when the character wrote one in it (else in its
    own), named for the caller, and one line on where the help is; None when it has none."""
    language = pick_language(caller.locale, character.language)
    lines = [
        m.text
        for m in opening_messages_for(character, caller.display_name, language)
        if m.role == "assistant"
    ]
    if not lines:
        return None
    hint = text(language, "start_hint", help=f"/{'help' if language == 'en' else 'ayuda'}")
    return Answer("\n\n".join([*lines, hint]))
