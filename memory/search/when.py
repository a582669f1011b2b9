"""Time in a query, relative to the conversation's clock: "yesterday", "la semana pasada",
"hace dos semanas", "last summer", in English and Spanish.

Each expression found becomes a span of dates; retrieval favours exchanges said inside one (and
leaves the words of the expression out of the search terms: "week" says when, not what). Named
months ("in May") are memory/search/retrieval.py's `named_months`; these are the expressions
that need the date of the conversation to mean anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from memory.search.terms import words

_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "un": 1, "una": 1, "uno": 1, "dos": 2,
    "tres": 3, "cuatro": 4, "cinco": 5, "seis": 6, "siete": 7, "ocho": 8, "nueve": 9, "diez": 10,
}  # fmt: skip
_UNITS = {
    "day": "day", "days": "day", "dia": "day", "dias": "day",
    "week": "week", "weeks": "week", "semana": "week", "semanas": "week",
    "month": "month", "months": "month", "mes": "month", "meses": "month",
    "year": "year", "years": "year", "ano": "year", "anos": "year",
}  # fmt: skip
# First month of each season (northern hemisphere, as the characters live); winter spans years.
_SEASONS = {
    "spring": 3, "primavera": 3, "summer": 6, "verano": 6,
    "autumn": 9, "fall": 9, "otono": 9, "winter": 12, "invierno": 12,
}  # fmt: skip
_LAST = {"last", "pasado", "pasada"}  # "last week", "la semana pasada"
_THIS = {"this", "este", "esta"}
_DAYS_BACK = {"yesterday": 1, "ayer": 1, "anteayer": 2, "today": 0, "hoy": 0}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
_SLACK_DAYS = {"day": 1, "week": 3, "month": 10, "year": 45}  # "N units ago", either side


@dataclass(frozen=True, slots=True)
class Span:
    """Dates from `first` to `last`, both included."""

    first: date
    last: date

    def holds(self, moment: datetime) -> bool:
        return self.first <= moment.date() <= self.last


@dataclass(frozen=True, slots=True)
class TimeQuery:
    spans: tuple[Span, ...]
    words: frozenset[str]  # the folded words of the expressions, not to be searched for


def _month_span(year: int, month: int, months: int = 1) -> Span:
    first = date(year, month, 1)
    end_month = month + months
    end_year = year + (end_month - 1) // 12
    following = date(end_year, (end_month - 1) % 12 + 1, 1)
    return Span(first, following - timedelta(days=1))


def _ago(count: int, unit: str, today: date) -> Span:
    """ "N units ago": around that day, give or take a little (people count loosely)."""
    centre = today - timedelta(days=count * _UNIT_DAYS[unit])
    slack = timedelta(days=_SLACK_DAYS[unit])
    return Span(centre - slack, min(centre + slack, today))


def _previous(unit: str, today: date) -> Span:
    """The calendar unit before today's: last week (Monday to Sunday), month or year."""
    if unit == "day":
        day = today - timedelta(days=1)
        return Span(day, day)
    if unit == "week":
        monday = today - timedelta(days=today.weekday() + 7)
        return Span(monday, monday + timedelta(days=6))
    if unit == "month":
        year, month = (today.year, today.month - 1) if today.month > 1 else (today.year - 1, 12)
        return _month_span(year, month)
    return Span(date(today.year - 1, 1, 1), date(today.year - 1, 12, 31))


def _current(unit: str, today: date) -> Span:
    if unit == "week":
        return Span(today - timedelta(days=today.weekday()), today)
    if unit == "month":
        return Span(today.replace(day=1), today)
    if unit == "year":
        return Span(date(today.year, 1, 1), today)
    return Span(today, today)


def _season(start_month: int, today: date, last: bool) -> Span:
    """The season's latest three months that have ended ("last summer") or begun ("this
    summer")."""
    year = today.year
    span = _month_span(year, start_month, 3)
    while (span.last >= today) if last else (span.first > today):
        year -= 1
        span = _month_span(year, start_month, 3)
    return span


def _weekend(today: date) -> Span:
    saturday = today - timedelta(days=(today.weekday() - 5) % 7 or 7)
    return Span(saturday, saturday + timedelta(days=1))


def time_query(query: str, now: datetime) -> TimeQuery:
    """The spans of dates the query's relative expressions name, seen from `now`."""
    tokens = words(query)
    today = now.date()
    spans: list[Span] = []
    used: set[str] = set()

    def take(span: Span, *parts: str) -> None:
        spans.append(span)
        used.update(parts)

    for index, token in enumerate(tokens):
        before = tokens[index - 1] if index else ""
        after = tokens[index + 1] if index + 1 < len(tokens) else ""
        if token == "semana" and tokens[max(index - 2, 0) : index] == ["fin", "de"]:
            continue  # "el fin de semana pasado" is the weekend, below
        if token in _DAYS_BACK:
            day = today - timedelta(days=_DAYS_BACK[token])
            take(Span(day, day), token)
        elif token in _UNITS and (before in _LAST or after in _LAST):
            take(_previous(_UNITS[token], today), token, before if before in _LAST else after)
        elif token in _UNITS and before in _THIS:
            take(_current(_UNITS[token], today), token, before)
        elif token in _UNITS and (after == "ago" or (index > 1 and tokens[index - 2] == "hace")):
            number = int(before) if before.isdigit() else _NUMBERS.get(before)
            if number:
                take(_ago(number, _UNITS[token], today), token, before, "ago", "hace")
        elif token in _SEASONS and (before in _LAST or after in _LAST or before in _THIS):
            last = before in _LAST or after in _LAST
            marker = before if before in _LAST | _THIS else after
            take(_season(_SEASONS[token], today, last), token, marker)
        elif token in {"weekend", "finde"} and (before in _LAST or "pasado" in tokens):
            take(_weekend(today), token, before, "pasado")
        elif token == "fin" and tokens[index + 1 : index + 3] == ["de", "semana"]:
            take(_weekend(today), "fin", "semana", "pasado")
    return TimeQuery(tuple(spans), frozenset(used - {""}))


_MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "enero"),
            ("february", "febrero"),
            ("march", "marzo"),
            ("april", "abril"),
            ("may", "mayo"),
            ("june", "junio"),
            ("july", "julio"),
            ("august", "agosto"),
            ("september", "septiembre", "setiembre"),
            ("october", "octubre"),
            ("november", "noviembre"),
            ("december", "diciembre"),
        ],
        start=1,
    )
    for name in names
}
_VERB_LIKE = {"may", "march"}  # months only next to a number: "may I", "march on"


def named_months(query: str) -> set[tuple[int | None, int]]:
    """(year or None, month) of every month the query names ("in June", "15 de mayo de 2023")."""
    tokens = words(query)
    found: set[tuple[int | None, int]] = set()
    for index, token in enumerate(tokens):
        month = _MONTHS.get(token)
        if month is None:
            continue
        near = [t for t in tokens[max(index - 3, 0) : index + 4] if t.isdigit()]
        if token in _VERB_LIKE and not near:
            continue
        year = next((int(t) for t in near if len(t) == 4), None)
        found.add((year, month))
    return found


def in_months(moment: datetime, months: set[tuple[int | None, int]]) -> bool:
    """Said in that month, or in the week after it (people tell of things once they are done)."""
    for year, month in months:
        for day in (moment, moment - timedelta(days=7)):
            if day.month == month and (year is None or day.year == year):
                return True
    return False
