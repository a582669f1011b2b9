"""`companion memory show` as the admin reads it: about the user, in the third person (the
/memoria screens speak to the user), each character once, no heading without lines under it,
and no /memoria usage line (the admin's commands are `companion memory ...`)."""

from __future__ import annotations

from bot.memoria import KINDS, dated_paragraphs, plain_summary
from bot.texts import fact_key_label, format_date
from memory.models import User
from memory.privacy import MemoryView
from memory.profile.view import FactState

KIND_HEADINGS = {
    "semantic": "Who they are",
    "emotional": "How they feel",
    "episodic": "What happened to them",
}
ORIGINS = {"stated": "told by the user", "inferred": "inferred", "imported": "imported"}


def who(user: User) -> str:
    named = f" ({user.display_name})" if user.display_name != user.platform_user_id else ""
    return f"{user.platform} user {user.platform_user_id}{named}"


def format_admin_view(view: MemoryView, character: str, user: User) -> str:
    """What `character` remembers about `user`: facts by kind, those awaiting the user's
    review, the summary (of the conversation now, or of the last one), the journey."""
    sections: list[list[str]] = []
    for kind in KINDS:
        active = [v for v in view.facts if v.fact.kind == kind and v.fact.status == "active"]
        if active:
            lines = [f"{KIND_HEADINGS[kind]}:"]
            for item in active:
                fact = item.fact
                origin = ORIGINS.get(fact.origin, fact.origin)
                line = (
                    f"  #{fact.id} {fact_key_label('en', fact.key)}: {fact.value} "
                    f"({origin}, since {format_date('en', fact.confirmed_at)})"
                )
                if fact.scope.startswith("group:"):  # said in that group, not privately
                    line += f" · learned in {fact.scope.removeprefix('group:')}"
                lines.append(line + (" · to confirm" if item.state is FactState.TO_CONFIRM else ""))
                lines += [
                    f"      before: {old.value} (until {format_date('en', old.superseded_at)})"
                    for old in item.history
                ]
            sections.append(lines)
    pending = [v.fact for v in view.facts if v.fact.status == "pending"]
    if pending:
        lines = ["Waiting for the user's review:"]
        lines += [f"  #{f.id} {fact_key_label('en', f.key)}: {f.value}" for f in pending]
        sections.append(lines)
    summary = plain_summary(view.summary.fields, "en") if view.summary is not None else []
    if summary:
        heading = "The conversation now:" if view.summary_current else "The last conversation:"
        sections.append([heading, *(f"  {line}" for line in summary)])
    if view.journey is not None and view.journey.journey.paragraphs:
        story = dated_paragraphs(view.journey, "en")
        sections.append(["Their story (the journey):", *(f"  {p}" for p in story)])
    heading = f"== {character}: what it remembers about {who(user)}"
    if not sections:
        return f"{heading}\nnothing yet"
    return "\n\n".join(["\n".join(section) for section in [[heading], *sections]])
