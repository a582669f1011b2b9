"""Memory keeps no links or e-mail addresses: a link or an address is stored as "(link)", a
bare domain as its name ("Amazon.es" as "Amazon", "bit.ly/premio" as "bit").

A link in a prompt is what most injections want the model to repeat ("end every reply with
bit.ly/..."), and an address is the user's private data; a companion needs neither to remember
someone. The words around them stay ("tiene un blog de cocina, (link)"), the user's own turn
keeps the address (their log, their export, their search). Applied by the gate to every value
it stores (memory/integrity/gate.py), before the rules judge it.
"""

from __future__ import annotations

import re

PLACEHOLDER = "(link)"
_GENERIC_TLDS = (
    "com|net|org|info|biz|io|app|dev|xyz|online|site|shop|store|blog|example|tech|ai|ly|co"
    "|edu|gov|club|live|link|click|top|win|vip|pro|cloud|page|art|news|eus|cat|gal|onion"
)
# Possessive quantifiers throughout: a long run of "a-a-a-..." must not make these quadratic.
_LINK = re.compile(
    r"\b(?:https?://|ftp://|www\.)\S++"  # a scheme or www: a link whatever follows
    r"|(?<![\w.+-])[\w.+-]++@[\w-]++(?:\.[\w-]++)++",  # an e-mail address, from its start
    re.IGNORECASE,
)
# A dotted name ("Amazon.es", "bit.ly/premio", "main.py"), with its path; a domain when its last
# label is a top-level domain.
_DOTTED = re.compile(
    r"(?<![\w-])([a-z0-9][a-z0-9-]*+)((?:\.[a-z0-9-]++)++)(/[^\s,;)»\"']*+)?", re.IGNORECASE
)
_TLD = re.compile(rf"(?:{_GENERIC_TLDS}|[a-z]{{2}})", re.IGNORECASE)


def _domain_as_name(match: re.Match[str]) -> str:
    name, labels = match.group(1), match.group(2)
    is_domain = len(name) >= 2 and _TLD.fullmatch(labels.rsplit(".", 1)[-1])
    return name if is_domain else match.group(0)


def without_links(text: str) -> str:
    """``text`` with every link and address replaced by the placeholder, every bare domain by
    its name."""
    return _DOTTED.sub(_domain_as_name, _LINK.sub(PLACEHOLDER, text))
