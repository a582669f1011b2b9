"""The formats of the known fact keys (memory/profile/fact_keys.py), checked by the gate's
`check_fact` before the value's words are judged: a name is a few words of letters, an age a
number, a date has digits. A known key holds its format, so there is no room in it for an
instruction.
"""

from __future__ import annotations

import re

from memory.profile.fact_keys import ValueFormat

_NAME_LEAD = re.compile(
    r"^(?:(?:yo\s+)?me\s+llamo|mi\s+nombre\s+es|se\s+llama|soy|ll[aá]mame|my\s+name\s+is"
    r"|call\s+me|i'?m|i\s+am|(?:she|he|they)\s+(?:is|are)\s+called|goes\s+by"
    r"|(?:prefers?|likes?)\s+to\s+be\s+called|(?:prefiero|prefiere)\s+que\s+(?:me|le)\s+llamen"
    r"|is\s+called)\s+",
    re.IGNORECASE,
)
_NAME = re.compile(r"^[^\W\d_]+(?:[ '’.\-][^\W\d_]+){0,3}\.?$")
_PRONOUNS = re.compile(r"^[^\W\d_]+(?:\s*/\s*[^\W\d_]+){0,3}$")
_AGE = re.compile(
    r"^(?:tiene|tengo|is|i\s+am|i'm|edad:?)?\s*(\d{1,3})\s*(?:años|anos|years?(?:\s+old)?|yo)?"
    r"\.?$",
    re.IGNORECASE,
)
_DATE = re.compile(r"^[\w ,./\-ºª°]+$")
# The bare forms of address: a pronoun the gate would otherwise read as speaking to the bot.
ADDRESS_FORMS = frozenset(
    ("tu", "de tu", "usted", "de usted", "vos", "informal", "formal", "tuteo", "you", "formally")
)
_PLACE = re.compile(r"^[^\W_][\w .,'’()\-/]*$")


def format_value(fmt: ValueFormat, value: str) -> tuple[str, str | None]:
    """The value in its key's format, or why it is not one."""
    if fmt is ValueFormat.NAME:
        value = _NAME_LEAD.sub("", value).strip(" .!")
        if not _NAME.match(value):
            return value, f"expects {fmt.value} (1-4 words of letters)"
    elif fmt is ValueFormat.PRONOUNS and not _PRONOUNS.match(value):
        return value, f"expects {fmt.value} such as she/her"
    elif fmt is ValueFormat.NUMBER:
        match = _AGE.match(value)
        if not match:
            return value, f"expects {fmt.value}"
        value = match.group(1)
    elif fmt is ValueFormat.DATE and (
        not _DATE.match(value) or not any(c.isdigit() for c in value) or len(value.split()) > 5
    ):
        return value, f"expects {fmt.value} such as 1990-05-14 or 14 de mayo"
    elif fmt is ValueFormat.PLACE and (not _PLACE.match(value) or len(value.split()) > 6):
        return value, f"expects {fmt.value}"
    return value, None
