"""An export loaded into a user's memory gets fresh ids: every reference is rewritten to them
(summary citations, the turn a summary covers up to, fact evidence and history). The rules,
once for every backend; each backend only inserts what these functions give."""

from __future__ import annotations

import json
import re
from typing import Any

_CITE = re.compile(r"\{cite:(\d+)\}")


def recited(text: str, turn_ids: dict[int, int]) -> str:
    """`{cite:OLD}` as `{cite:NEW}`; a citation of a turn the export lacks cites 0 (nothing)."""
    return _CITE.sub(lambda m: f"{{cite:{turn_ids.get(int(m.group(1)), 0)}}}", text)


def evidence(ids: list[int], turn_ids: dict[int, int]) -> str:
    """The JSON list of the new ids of the turns in `ids` that the export holds."""
    return json.dumps([turn_ids[i] for i in ids if i in turn_ids])


def summary_values(row: dict[str, Any], turn_ids: dict[int, int]) -> tuple[str, str, int]:
    """(fields_json, cited_ids_json, covers_up_to_turn_id) of an exported summary, rewritten."""
    fields = {
        name: [recited(claim, turn_ids) for claim in claims]
        for name, claims in row["fields_json"].items()
    }
    cited = sorted(turn_ids[i] for i in row["cited_ids_json"] if i in turn_ids)
    covered = max(
        (new for old, new in turn_ids.items() if old <= row["covers_up_to_turn_id"]), default=0
    )
    return json.dumps(fields, ensure_ascii=False), json.dumps(cited), covered


def without_citing(fields_json: str, gone: set[int]) -> tuple[str, str] | None:
    """A summary's (fields_json, cited_ids_json) with every claim that cites a turn of `gone`
    left out, and every claim that cites nothing: a summary a forget touches keeps only what
    shows it rests on turns still there (an uncited claim may repeat the forgotten person's
    words, and nothing could tell). None when nothing is left out (the row stays as it is). A
    scene participant's forget deletes their lines, and a claim resting on them goes too."""
    fields = json.loads(fields_json)
    kept = {name: [c for c in claims if _rests_on_kept(c, gone)] for name, claims in fields.items()}
    if kept == fields:
        return None
    cited = sorted({int(i) for claims in kept.values() for c in claims for i in _CITE.findall(c)})
    return json.dumps(kept, ensure_ascii=False), json.dumps(cited)


def _rests_on_kept(claim: str, gone: set[int]) -> bool:
    cited = {int(i) for i in _CITE.findall(claim)}
    return bool(cited) and not cited & gone
