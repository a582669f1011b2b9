"""Time in a query: relative expressions become dates seen from the conversation's clock, and
recall favours what was said then."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from memory.search.retrieval import Retriever
from memory.search.when import time_query
from memory.store import MemoryStore, open_store
from tests.test_retrieval import new_thread, talk

NOW = datetime(2023, 10, 18, 12, 0, tzinfo=UTC)  # a Wednesday


def spans(query: str) -> list[tuple[date, date]]:
    return [(span.first, span.last) for span in time_query(query, NOW).spans]


def d(month: int, day: int, year: int = 2023) -> date:
    return date(year, month, day)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("what did I do yesterday?", [(d(10, 17), d(10, 17))]),
        ("¿qué hice ayer?", [(d(10, 17), d(10, 17))]),
        ("anteayer", [(d(10, 16), d(10, 16))]),
        ("la semana pasada fui al cine", [(d(10, 9), d(10, 15))]),  # Monday to Sunday
        ("what happened last week", [(d(10, 9), d(10, 15))]),
        ("two weeks ago", [(d(10, 1), d(10, 7))]),
        ("hace dos semanas", [(d(10, 1), d(10, 7))]),
        ("hace 3 días", [(d(10, 14), d(10, 16))]),
        ("last month", [(d(9, 1), d(9, 30))]),
        ("el mes pasado", [(d(9, 1), d(9, 30))]),
        ("el año pasado", [(d(1, 1, 2022), d(12, 31, 2022))]),
        ("last summer", [(d(6, 1), d(8, 31))]),
        ("el verano pasado", [(d(6, 1), d(8, 31))]),
        ("last winter", [(d(12, 1, 2022), d(2, 28))]),  # winter spans the new year
        ("el fin de semana pasado", [(d(10, 14), d(10, 15))]),  # not "la semana pasada"
        ("last weekend", [(d(10, 14), d(10, 15))]),
        ("this week", [(d(10, 16), d(10, 18))]),
        ("the week was long", []),  # a unit without "last", "this" or "ago" is no date
        ("hace frío", []),
    ],
)
def test_relative_expressions_become_dates(query: str, expected: list[tuple[date, date]]) -> None:
    assert spans(query) == expected


def test_last_summer_in_july_is_the_year_before() -> None:
    july = datetime(2023, 7, 10, tzinfo=UTC)
    assert [(s.first, s.last) for s in time_query("last summer", july).spans] == [
        (d(6, 1, 2022), d(8, 31, 2022))
    ]
    assert time_query("this summer", july).spans[0].first == d(6, 1)


def test_the_expression_words_are_not_search_terms() -> None:
    assert time_query("¿qué pasó con el perro la semana pasada?", NOW).words == {
        "semana",
        "pasada",
    }


@pytest.fixture
async def store(database_target: Path | str) -> AsyncIterator[MemoryStore]:
    opened = await open_store(database_target)
    yield opened
    await opened.close()


async def test_recall_favours_what_was_said_in_the_named_time(store: MemoryStore) -> None:
    ana = await new_thread(store, "ana")
    # The same topic twice, months apart, the older one matching the query's words better.
    old = await talk(
        store,
        ana,
        [("El perro del vecino ladró toda la noche, el perro no calla.", "Qué perro.")],
        NOW - timedelta(days=120),
    )
    recent = await talk(
        store, ana, [("Otra vez el perro.", "Vaya noche.")], NOW - timedelta(days=8)
    )
    retriever = Retriever(store)
    query = "¿qué hizo el perro la semana pasada?"
    plain = await retriever.search(ana, query, 5)
    assert plain[0].turn_ids[0] == old[0][0].id
    dated = await retriever.search(ana, query, 5, now=NOW)
    assert dated[0].turn_ids[0] == recent[0][0].id
    # "semana" and "pasada" are not searched for: an exchange about a week is no match.
    await talk(store, ana, [("Una semana pasada por agua.", "Descansa.")], NOW)
    assert len(await retriever.search(ana, query, 5, now=NOW)) == 2
