"""The time as the user lives it, for this turn's context: their local date, hour and part of
the day, and how long it has been since they last wrote. Pure functions of `now`, so the
prompt stays testable; rendered after the last cache breakpoint, as it changes every turn."""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_WEEKDAYS = {
    "es": ("lunes", "martes", "miércoles", "jueves", "viernes", "sábado", "domingo"),
    "en": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
}
# (first hour, words): the part of the day a greeting follows ("buenas noches" after 21 h).
_PARTS = {
    "es": ((0, "de madrugada"), (6, "por la mañana"), (13, "por la tarde"), (21, "por la noche")),
    "en": ((0, "in the small hours"), (6, "in the morning"), (12, "in the afternoon"),
           (18, "in the evening"), (22, "at night")),
}  # fmt: skip
_UNITS = {
    "es": {"min": "min", "h": "h", "day": ("día", "días"), "week": ("semana", "semanas"),
           "month": ("mes", "meses"), "year": ("año", "años")},
    "en": {"min": "min", "h": "h", "day": ("day", "days"), "week": ("week", "weeks"),
           "month": ("month", "months"), "year": ("year", "years")},
}  # fmt: skip
LONG_GAP = timedelta(days=7)


def zone_named(name: str | None) -> tzinfo | None:
    """The IANA zone of that name ("Europe/Madrid"), or None when unknown or not given."""
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def local_moment(now: datetime, zone: str | None) -> datetime:
    """`now` on the user's clock; the deployment's own zone (the clock's) when theirs is unset."""
    found = zone_named(zone)
    return now.astimezone(found) if found is not None else now


def part_of_day(hour: int, language: str) -> str:
    parts = _PARTS.get(language, _PARTS["en"])
    return [words for start, words in parts if hour >= start][-1]


def describe_moment(now: datetime, zone: str | None, language: str) -> str:
    """'domingo 2026-11-29 22:05 (Europe/Madrid), por la noche'."""
    local = local_moment(now, zone)
    weekday = _WEEKDAYS.get(language, _WEEKDAYS["en"])[local.weekday()]
    where = zone if zone_named(zone) is not None else local.strftime("%Z")
    stamp = f"{weekday} {local:%Y-%m-%d %H:%M}" + (f" ({where})" if where else "")
    return f"{stamp}, {part_of_day(local.hour, language)}"


def _plural(language: str, unit: str, count: int) -> str:
    one, many = _UNITS.get(language, _UNITS["en"])[unit]
    return f"{count} {one if count == 1 else many}"


def describe_gap(gap: timedelta, language: str) -> str:
    """A coarse length of time, as one would say it: '90 min', '5 h', '3 semanas'."""
    minutes = int(gap.total_seconds() // 60)
    units = _UNITS.get(language, _UNITS["en"])
    if minutes < 120:
        return f"{minutes} {units['min']}"
    hours = minutes // 60
    if hours < 48:
        return f"{hours} {units['h']}"
    days = hours // 24
    if days < 14:
        return _plural(language, "day", days)
    if days < 61:
        return _plural(language, "week", days // 7)
    if days < 730:
        return _plural(language, "month", days // 30)
    return _plural(language, "year", days // 365)
