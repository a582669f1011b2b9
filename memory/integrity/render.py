"""The memory gate's second wall (memory/integrity/gate.py): whatever is stored is shown as data,
on one line, with no heading, fence, markup bracket or block delimiter left in it
(memory/engine/prompt.py puts it between `DATA_OPEN` and `DATA_CLOSE`).
"""

from __future__ import annotations

import re

from memory.integrity.normalise import WS, clean

_CITE = re.compile(r"\{cite:\d+\}")
DATA_OPEN = "⟦"
DATA_CLOSE = "⟧"
_RENDER_STRIP = re.compile(r"[`⟦⟧<>{}\[\]|\\]|#{2,}|^\s*[#>*\-=+]+\s*")


def as_data_claim(claim: str) -> str:
    """A summary claim as data: like `as_data`, but its {cite:ID} codes stay readable."""
    pieces = _CITE.split(claim)
    codes = _CITE.findall(claim)
    out = as_data(pieces[0])
    for code, piece in zip(codes, pieces[1:], strict=True):
        out = f"{out} {code} {as_data(piece)}"
    return WS.sub(" ", out).strip()


def as_data(text: str) -> str:
    """Stored text as it may appear inside the memory block: one line, and no heading, code
    fence, markup bracket or block delimiter left in it, whatever was stored."""
    line = clean(text)
    previous = None
    while previous != line:
        previous = line
        line = _RENDER_STRIP.sub(" ", line)
        line = WS.sub(" ", line).strip()
    return line
