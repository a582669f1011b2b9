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
_LINK = re.compile(
    r"\b(?:https?://|ftp://|www\.)\S+"  # a scheme or www: a link whatever follows
    r"|[\w.+-]+@[\w-]+(?:\.[\w-]+)+",  # an e-mail address
    re.IGNORECASE,
)
# A bare domain: labels of two or more characters and a top-level domain, with its path.
_DOMAIN = re.compile(
    rf"\b([a-z0-9][a-z0-9-]+)(?:\.[a-z0-9][a-z0-9-]+)*\.(?:{_GENERIC_TLDS}|[a-z]{{2}})\b"
    r"(?:/[^\s,;)»\"']*)?",
    re.IGNORECASE,
)


def without_links(text: str) -> str:
    """``text`` with every link and address replaced by the placeholder, every bare domain by
    its name."""
    return _DOMAIN.sub(lambda m: m.group(1), _LINK.sub(PLACEHOLDER, text))
