"""Recall from the turn log: scoped to one user and one character, thresholded, dated, within
budget, safe with any query, and forgetful when turns are deleted."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bench.locomo_retrieval import main as bench_main
from memory.engine.llm import ToolCall
from memory.engine.tokens import TokenEstimator
from memory.engine.tools import ToolBox
from memory.models import Thread, Turn
from memory.search.retrieval import Retriever, named_months
from memory.search.terms import query_terms
from memory.store import MemoryStore, open_store
from memory.store.sqlite.fts import match_expression
from tests.patience import PATIENCE

START = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)
CHARACTER = "detective_bilbao"

SMALL_TALK = [
    ("Buenas tardes, ¿qué tal el día?", "Tranquilo. Llueve sobre la ría."),
    ("He comido lentejas con chorizo.", "Buen plato para un día gris."),
    ("Mañana tengo médico a las diez.", "Apúntalo. Luego me cuentas."),
    ("Estoy viendo una serie de detectives.", "Ninguna se parece a este oficio."),
    ("Hoy el autobús llegó tarde otra vez.", "Bilbao y sus horarios."),
    ("Mi vecina toca el piano por las noches.", "Peor sería la trompeta."),
]


@pytest.fixture
async def store(database_target: Path | str) -> AsyncIterator[MemoryStore]:
    opened = await open_store(database_target)
    yield opened
    await opened.close()


async def talk(
    store: MemoryStore,
    thread: Thread,
    exchanges: list[tuple[str, str]],
    start: datetime = START,
) -> list[tuple[Turn, Turn]]:
    """MemoryStore each (user, reply) pair as one session on its own day."""
    stored = []
    for day, (user_text, reply_text) in enumerate(exchanges):
        at = start + timedelta(days=day)
        conversation = await store.start_conversation(thread, at)
        user_turn = await store.add_turn(conversation, "user", user_text, at)
        reply = await store.add_turn(
            conversation, "assistant", reply_text, at + timedelta(minutes=1)
        )
        await store.end_conversation(conversation.id, "test", at + timedelta(minutes=2))
        stored.append((user_turn, reply))
    return stored


async def new_thread(
    store: MemoryStore, platform_user: str, character: str = CHARACTER, scope: str = "dm"
) -> Thread:
    user = await store.upsert_user("telegram", platform_user, platform_user, START)
    return Thread(user.id, character, scope)


def ids_of(exchanges: list[Any]) -> set[int]:
    return {turn_id for exchange in exchanges for turn_id in exchange.turn_ids}


async def test_search_never_crosses_users(store: MemoryStore) -> None:
    ana = await new_thread(store, "ana")
    bea = await new_thread(store, "bea")
    [(ana_turn, ana_reply)] = await talk(store, ana, [("Mi gato Lenteja ronca.", "Qué gato.")])
    [(bea_turn, bea_reply)] = await talk(store, bea, [("Mi gato Lenteja ronca.", "Qué gato.")])
    retriever = Retriever(store)
    for where in (ana, (ana.user_id, CHARACTER)):
        found = await retriever.search(where, "¿cómo se llama mi gato Lenteja?", 10)
        assert ids_of(found) == {ana_turn.id, ana_reply.id}
    found = await retriever.search(bea, "gato Lenteja", 10)
    assert ids_of(found) == {bea_turn.id, bea_reply.id}
    fragments = await retriever.fragments(bea, "gato Lenteja", set(), 600)
    assert ids_of(fragments) == {bea_turn.id, bea_reply.id}


async def test_search_never_crosses_characters_nor_scopes(store: MemoryStore) -> None:
    detective = await new_thread(store, "ana")
    keeper = Thread(detective.user_id, "lighthouse_keeper", "dm")
    group = Thread(detective.user_id, CHARACTER, "group:telegram:-100")
    [(secret, _)] = await talk(store, detective, [("Mi contraseña es pez espada.", "Olvidada.")])
    [(other, _)] = await talk(store, keeper, [("El pez espada del faro.", "Qué faro.")])
    [(public, _)] = await talk(store, group, [("Un pez espada en la lonja.", "Ya.")])
    retriever = Retriever(store)
    in_dm = ids_of(await retriever.search(detective, "pez espada", 10))
    assert secret.id in in_dm and other.id not in in_dm and public.id not in in_dm
    in_group = ids_of(await retriever.fragments(group, "pez espada", set(), 600))
    assert public.id in in_group and secret.id not in in_group
    everywhere = ids_of(await retriever.search((detective.user_id, CHARACTER), "pez espada", 10))
    assert {secret.id, public.id} <= everywhere and other.id not in everywhere
    assert await retriever.search((detective.user_id, "nobody"), "pez espada", 10) == []


async def test_lookup_turn_returns_only_the_callers_own_turns_in_this_scope(
    store: MemoryStore,
) -> None:
    ana = await new_thread(store, "ana")
    bea = await new_thread(store, "bea")
    [(mine, reply)] = await talk(store, ana, [("Vivo en Deusto.", "Buen barrio.")])
    [(theirs, _)] = await talk(store, bea, [("Vivo en Getxo.", "Lejos.")])
    [(other_character, _)] = await talk(
        store, Thread(ana.user_id, "lighthouse_keeper", "dm"), [("Hola faro.", "Hola.")]
    )
    in_group = Thread(ana.user_id, CHARACTER, "group:telegram:-5")
    [(said_in_group, _)] = await talk(store, in_group, [("En el grupo no.", "Vale.")])
    wanted: list[Any] = [
        mine.id,
        reply.id,
        theirs.id,
        other_character.id,
        said_in_group.id,
        0,
        -3,
        10**6,
        2**70,
        "7",
        True,
    ]
    tools = ToolBox(store, Retriever(store), ana, True, (), 1500, TokenEstimator(), ("A", "K"))
    outcome = await tools.run(ToolCall("lookup_turn", {"ids": wanted}))
    lines = outcome.text.splitlines()
    assert lines[0].endswith("user: Vivo en Deusto.") and lines[1].endswith(": Buen barrio.")
    assert lines[2:5] == [
        f"[{theirs.id}] not found",
        f"[{other_character.id}] not found",
        f"[{said_in_group.id}] not found",
    ]  # another user, character, scope
    assert all(line.endswith("not found") for line in lines[2:])
    assert outcome.recalled_turn_ids == (mine.id, reply.id)


async def test_fragments_are_dated_relevant_fresh_and_within_budget(store: MemoryStore) -> None:
    ana = await new_thread(store, "ana")
    history = [
        ("Mi hermana Itziar se casa en octubre en Gernika.", "Enhorabuena a Itziar."),
        *SMALL_TALK,
        ("La boda de Itziar será en el caserío de mis abuelos.", "Buen sitio para una boda."),
        *SMALL_TALK,
        ("Itziar quiere que lleve el anillo de la abuela a la boda.", "Guárdalo bien."),
    ]
    stored = await talk(store, ana, history)
    first, second, third = stored[0], stored[len(SMALL_TALK) + 1], stored[-1]
    retriever = Retriever(store)
    query = "¿Te acuerdas de la boda de mi hermana Itziar?"
    fragments = await retriever.fragments(ana, query, set(), 600)
    by_ids = {f.turn_ids: f for f in fragments}
    assert set(by_ids) == {(a.id, b.id) for a, b in (first, second, third)}
    for user_turn, reply in (first, second, third):
        fragment = by_ids[(user_turn.id, reply.id)]
        assert fragment.when == user_turn.created_at
        assert fragment.text == f"User: {user_turn.text}\nCharacter: {reply.text}"

    window = {third[0].id, third[1].id}
    fresh = await retriever.fragments(ana, query, window, 600)
    assert all(not window & set(f.turn_ids) for f in fresh) and len(fresh) == 2

    assert await retriever.fragments(ana, "¿Qué opinas de la física cuántica?", set(), 600) == []
    assert await retriever.fragments(ana, "", set(), 600) == []

    tokens = TokenEstimator()
    budget = tokens.count(f"[{START:%Y-%m-%d}] {fragments[0].text}") + 5
    tight = await retriever.fragments(ana, query, set(), budget)
    assert len(tight) == 1
    assert sum(tokens.count(f"[{f.when:%Y-%m-%d}] {f.text}") for f in tight) <= budget
    assert len(await retriever.fragments(ana, query, set(), 600, max_fragments=2)) == 2


async def test_an_exchange_is_the_user_turn_and_its_reply_with_names(store: MemoryStore) -> None:
    ana = await new_thread(store, "ana")
    stored = await talk(store, ana, [("¿Qué le pasó a tu socio?", "Le dispararon en Abando.")])
    found = await Retriever(store).search(ana, "Abando", 5, names=("Ana", "Ander"))
    assert len(found) == 1
    assert found[0].turn_ids == (stored[0][0].id, stored[0][1].id)
    assert found[0].text == "Ana: ¿Qué le pasó a tu socio?\nAnder: Le dispararon en Abando."
    assert 0 < found[0].score <= 1
    # The names label the speakers but are not searched for: every exchange is between them.
    assert await Retriever(store).search(ana, "Ana Ander", 5, names=("Ana", "Ander")) == []


HOSTILE = [
    '"',
    '""',
    "AND OR NOT",
    "*",
    "NEAR(",
    "NEAR(gato perro, 2)",
    "gato*",
    "^gato",
    "text: gato",
    "owner : o1c64",
    "{owner text}: gato",
    "gato) OR (perro",
    "🐈🔥",
    "",
    "   ",
    "¿¡Ñandú, pingüino y acción!?",
    "x" * 5000,
    "a - b + c : d ; e ' f",
    "\x00",
]


@pytest.mark.parametrize("query", HOSTILE)
async def test_hostile_queries_never_raise(store: MemoryStore, query: str) -> None:
    ana = await new_thread(store, "ana")
    bea = await new_thread(store, "bea")
    await talk(store, ana, [("El gato y el perro del ñandú.", "Pingüino en acción.")])
    [(theirs, _)] = await talk(store, bea, [("gato perro owner text o1c64", "NEAR")])
    retriever = Retriever(store)
    found = await retriever.search(ana, query, 10)
    assert theirs.id not in ids_of(found)
    assert theirs.id not in ids_of(await retriever.fragments(ana, query, set(), 600))


def test_query_terms_drop_stop_words_and_fold_accents() -> None:
    terms = query_terms("¿Qué pasó con la CANCIÓN que me cantaste en el 2023?")
    assert [t.word for t in terms] == ["paso", "cancion", "cantaste", "2023"]
    expression = match_expression(7, "keeper", None, terms)
    assert '"o7c6b6565706572wcancion"*' in expression  # a stem, searched as a prefix
    assert '"o7c6b6565706572w2023"' in expression and '2023"*' not in expression  # a number
    assert named_months("what did I do in May 2023?") == {(2023, 5)}
    assert named_months("¿qué hice en junio?") == {(None, 6)}
    assert named_months("may I ask you something?") == set()


def everything_in(path: Path) -> str:
    """Every value of every table of the database file, FTS shadow tables included."""
    seen = []
    with sqlite3.connect(path) as raw:
        tables = [
            row[0] for row in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        for table in tables:
            if table == "turn_search":  # the virtual table itself: its shadow tables hold its data
                continue
            for row in raw.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    if isinstance(value, bytes):
                        value = value.decode("latin-1")
                    seen.append(str(value).lower())
    return "\n".join(seen)


def index_terms(path: Path) -> set[str]:
    """The words in the index, without the owner prefix every token carries."""
    with sqlite3.connect(path) as raw:
        raw.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, turn_search, 'row')")
        terms = [row[0] for row in raw.execute("SELECT term FROM temp.vocab")]
    return {match.group(1) for term in terms if (match := _WORD_TOKEN.match(term))}


_WORD_TOKEN = re.compile(r"^o\d+c[0-9a-f]*w(.+)$")


def raw_bytes(path: Path) -> bytes:
    """The database file and its write-ahead log, byte for byte, lower-cased."""
    wal = Path(f"{path}-wal")
    return (path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")).lower()


@pytest.mark.sqlite_only  # reads the FTS5 index and the file's bytes
async def test_deleted_turns_leave_search_and_every_table(store: MemoryStore) -> None:
    ana = await new_thread(store, "ana")
    stored = await talk(
        store,
        ana,
        [("Mi mote secreto es Zumalakarregi.", "Zumalakarregi, apuntado."), *SMALL_TALK[:2]],
    )
    retriever = Retriever(store)
    assert await retriever.search(ana, "Zumalakarregi", 5)
    assert "zumalakarregi" in everything_in(store.path)  # the scan does see the index
    assert "zumalakarregi" in index_terms(store.path)
    for turn in stored[0]:
        await store._execute("DELETE FROM turns WHERE id = ?", (turn.id,))
    assert await retriever.search(ana, "Zumalakarregi", 5) == []
    await store.purge_search_index()
    assert await store.purge_settled(timeout=PATIENCE)  # the purge runs in the background
    assert "zumalakarregi" not in everything_in(store.path)
    assert "zumalakarregi" not in index_terms(store.path)
    assert not {"mote", "secreto", "apuntado"} & index_terms(store.path)
    assert "lentejas" in index_terms(store.path)  # the other turns stay findable
    assert await retriever.search(ana, "lentejas", 5)
    assert b"zumalakarregi" not in raw_bytes(store.path)


@pytest.mark.sqlite_only  # reads the FTS5 index and the file's bytes
async def test_an_edited_turn_is_reindexed(store: MemoryStore) -> None:
    """Turns are never edited, but if one ever is, the index must follow, not keep the old words."""
    ana = await new_thread(store, "ana")
    [(turn, _)] = await talk(store, ana, [("Mi perro se llama Txuri.", "Bonito nombre.")])
    await store._execute(
        "UPDATE turns SET text = 'Mi perro se llama Beltza.' WHERE id = ?", (turn.id,)
    )
    retriever = Retriever(store)
    assert await retriever.search(ana, "Txuri", 5) == []
    assert ids_of(await retriever.search(ana, "Beltza", 5)) >= {turn.id}
    await store.purge_search_index()
    assert "txuri" not in index_terms(store.path)


@pytest.mark.sqlite_only  # reads the FTS5 index and the file's bytes
async def test_forgetting_a_character_empties_its_index(store: MemoryStore) -> None:
    ana = await new_thread(store, "ana")
    bea = await new_thread(store, "bea")
    await talk(store, ana, [("Guardo el mapa del tesoro en Mundaka.", "Secreto guardado.")])
    await talk(store, bea, [("Mi tesoro es mi perro.", "Buen tesoro.")])
    await store.forget(ana.user_id, CHARACTER)
    assert "mundaka" not in everything_in(store.path)
    assert "mundaka" not in index_terms(store.path)
    assert await Retriever(store).search(ana, "tesoro Mundaka", 5) == []
    assert await Retriever(store).search(bea, "tesoro", 5)


def _line(speaker: str, dia_id: str, text: str, caption: str = "") -> dict[str, str]:
    line = {"speaker": speaker, "dia_id": dia_id, "text": text}
    return line | {"blip_caption": caption} if caption else line


def _qa(question: str, evidence: list[str], category: int) -> dict[str, Any]:
    return {"question": question, "answer": "-", "evidence": evidence, "category": category}


LOCOMO_CONVERSATION = {
    "speaker_a": "Ada",
    "speaker_b": "Bo",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        _line("Ada", "D1:1", "I adopted a grey cat called Pebble last week."),
        _line("Bo", "D1:2", "Pebble is a lovely name for a cat!"),
        _line("Ada", "D1:3", "I also started pottery classes on Tuesdays."),
        _line("Bo", "D1:4", "Pottery sounds relaxing."),
    ],
    "session_2_date_time": "10:05 am on 12 June, 2023",
    "session_2": [
        _line("Bo", "D2:1", "How is the pottery going?"),
        _line("Ada", "D2:2", "I made a blue vase for my mother.", "a photo of a blue vase"),
        _line("Bo", "D2:3", "She will love the vase."),
    ],
    "session_3_date_time": "9:00 am on 20 June, 2023",  # a date key without a session
}
LOCOMO_QA = [
    _qa("What is the name of Ada's cat?", ["D1:1"], 4),
    _qa("What did Ada make in pottery in June?", ["D1:3; D2:2"], 1),  # malformed, as in LoCoMo
    _qa("When did Ada adopt Pebble?", ["D1:1"], 2),
    _qa("Would Ada like a dog?", ["D9:9"], 3),  # evidence that names no line: skipped
    _qa("What is Ada's dog called?", [], 5),  # adversarial: not a retrieval question
]


def write_locomo(path: Path) -> Path:
    data = [
        {"sample_id": f"conv-{n}", "conversation": LOCOMO_CONVERSATION, "qa": LOCOMO_QA}
        for n in range(3)
    ]
    path.write_text(json.dumps(data))
    return path


def test_the_bench_runs_on_a_small_locomo_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_locomo(tmp_path / "locomo.json")
    started = time.monotonic()
    assert bench_main([str(data), "--json", "--fit-share", "0.3"]) == 0
    assert time.monotonic() - started < 5
    report = json.loads(capsys.readouterr().out)
    for key in ("recall_at_5", "recall_at_10", "recall_600_tokens", "search_p95_ms"):
        assert key in report
    for key in ("recall_at_5", "recall_at_10", "recall_600_tokens"):
        assert 0.0 <= report[key] <= 1.0
    assert report["questions"] == 6  # two held-out conversations, 3 answerable questions each
    assert report["recall_at_10"] == 1.0
    assert report["fit_conversations"] == ["conv-0"]
    assert report["held_out_conversations"] == ["conv-1", "conv-2"]
    assert bench_main([str(data)]) == 0
    assert "HELD-OUT" in capsys.readouterr().out
    # --fit-share 0 sets nothing aside; --loo fits each conversation's threshold on the others.
    assert bench_main([str(data), "--json", "--fit-share", "0"]) == 0
    every = json.loads(capsys.readouterr().out)
    assert every["held_out_conversations"] == ["conv-0", "conv-1", "conv-2"]
    assert every["questions"] == 9 and every["fit_conversations"] == []
    assert bench_main([str(data), "--json", "--loo"]) == 0
    loo = json.loads(capsys.readouterr().out)
    assert loo["questions"] == 9 and set(loo["fitted_gate_threshold_relative"]) == {
        "conv-0",
        "conv-1",
        "conv-2",
    }
    assert 0.0 <= loo["fragment_recall"] <= 1.0


async def test_counts_from_the_candidates_equal_the_index_counts(store: MemoryStore) -> None:
    """When every matching turn is a candidate, document frequencies are counted in Python;
    they must be the ones the index gives, accents, prefixes and numbers included."""
    from memory.search.retrieval import _document_counts
    from memory.search.terms import query_terms

    ana = await new_thread(store, "ana")
    await talk(
        store,
        ana,
        [
            ("Mi perra Canela corre por la playa de Laida.", "¡Qué suerte tiene Canela!"),
            ("Corríamos juntas cada mañana, 5 kilómetros.", "Cinco kilómetros es mucho."),
            ("El café de la esquina cerró en 2023.", "Una pena, el café era bueno."),
            ("Canela odia el café.", "Los perros y el café no se llevan."),
        ],
    )
    terms = query_terms("¿Canela corría por la playa o tomaba café en 2023? kilómetros 5")
    ids, rows = await store.search_exchanges(ana.user_id, CHARACTER, "dm", terms, 40)
    patterns = [term.pattern() for term in terms]
    counted = _document_counts(patterns, [turn for *_, turn in rows], ids)
    assert counted == await store.search_term_counts(ana.user_id, CHARACTER, "dm", terms)
    assert max(counted) >= 3  # the thread really repeats terms: the comparison has teeth


def test_query_terms_stem_with_snowball_in_the_query_language() -> None:
    # Snowball's stems, cut to what they share with the word and searched as prefixes: the
    # hand-written suffix list left "adoption" whole (missing "adopt") and "running" as "runn".
    english = {t.word: t.stem for t in query_terms("Why did you stop running after the adoption?")}
    assert english["running"] == "run" and english["adoption"] == "adopt"
    assert english["stop"] == "stop"
    # "studies" stems to "studi", which "study" does not start with: final vowels go too.
    assert query_terms("my studies")[0].stem == "stud"
    spanish = query_terms("¿Cuándo fue lo de las canciones de la semana?")
    assert [t.stem for t in spanish] == ["cancion", "seman"]
    # A query without marker words is stemmed in the character's language.
    assert query_terms("canciones", language="es")[0].stem == "cancion"
    assert query_terms("happiness", language="en")[0].stem == "happ"
