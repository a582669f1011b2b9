"""The journey's rules listed in issue 35 ("Tests that must exist"), each through the real
engine, database and fake Messages API: a test that fails when its rule is broken."""

from __future__ import annotations

from datetime import timedelta

from bot.app import App
from bot.memoria import Memoria
from cards.character import CharacterBook
from memory.journey.model import Journey
from memory.models import User
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropic
from tests.helpers import dm, group
from tests.patience import PATIENCE
from tests.raw_db import raw_database, traces_of
from tests.test_journey import (
    ROUTE,
    block2,
    chronicle,
    end_by_timer,
    stored_journey,
    turn_ids,
    two_conversations,
)
from tests.test_profile import op, record

KOLDO = "detective_bilbao"


async def ana(app: App) -> User:
    user = await app.store.find_user("telegram", "u1")
    assert user is not None
    return user


async def test_a_password_said_without_a_telltale_word_is_masked_by_value(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await app.companion.handle(dm("Apunta: la contraseña del banco es Tx9!pass22"))
    await app.companion.handle(dm("Hoy he ido al puerto a ver los barcos"))
    port = turn_ids(app)[-1]
    fake_anthropic.queue(
        # the model copies the value without the word that named it
        chronicle(f"Ana fue al puerto {{cite:{port}}} y repitió Tx9!pass22 entre risas."),
        route=ROUTE,
    )
    await end_by_timer(app, clock)
    [(_, text)] = stored_journey(app)
    assert "puerto" in text and "Tx9!pass22" not in text


async def test_of_two_chronicles_racing_the_one_from_older_input_loses(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await two_conversations(app, fake_anthropic, clock)
    user = await ana(app)
    read = await app.store.journey(user.id, KOLDO)  # what both chroniclers read
    assert read is not None and read.id is not None
    # both conversations owed at once, as two workers would find them
    with raw_database(app.settings) as raw:
        raw.execute("DELETE FROM journey_runs")
    first_conversation, second_conversation = await app.store.conversations_pending_journey()
    now = clock()
    first = Journey(user.id, KOLDO, ("Ana voló a Roma.",), None, now)
    assert await app.store.save_journey(first, second_conversation.id, read.id, now)
    # the other writer built on the journey both read, now older than the one stored: it loses
    second = Journey(user.id, KOLDO, ("Ana nunca voló.",), None, now + timedelta(1))
    assert not await app.store.save_journey(second, first_conversation.id, read.id, now)
    [(_, text)] = stored_journey(app)
    assert text == "Ana voló a Roma."
    assert [c.id for c in await app.store.conversations_pending_journey()] == [
        first_conversation.id
    ]  # still owed: chronicled again, from the newer journey


async def test_memoria_historia_borrar_purges_the_bytes(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await app.companion.handle(dm("Hoy he probado una bebida nueva en el bar"))
    said = turn_ids(app)[0]
    fake_anthropic.queue(
        chronicle(f"Ana descubrió la zarzaparrilla {{cite:{said}}} en un bar del puerto."),
        route=ROUTE,
    )
    await end_by_timer(app, clock)
    assert traces_of(app.settings, "zarzaparrilla")  # only the journey holds the word
    shown = await Memoria(app.memory).run(await ana(app), KOLDO, "Koldo", "dm", "es", "historia",
                                          ["borrar"])  # fmt: skip
    assert "borr" in shown.text.lower()
    assert await app.store.purge_settled(timeout=PATIENCE)
    assert traces_of(app.settings, "zarzaparrilla") == []  # the file and the WAL


async def test_deleting_a_fact_removes_sentences_citing_any_of_its_evidence(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await app.companion.handle(dm("Me da miedo volar"))
    await app.companion.handle(dm("Sobre todo los despegues"))
    fear, takeoff = turn_ids(app)[:2]
    fake_anthropic.queue(
        record(op("emotional", "fears", "volar", [fear, takeoff])), route="record_profile"
    )
    fake_anthropic.queue(
        chronicle(
            f"Ana contó que le daba miedo volar {{cite:{fear}}}. Sobre todo temía los "
            f"despegues {{cite:{takeoff}}}. Koldo la tranquilizó."
        ),
        route=ROUTE,
    )
    await end_by_timer(app, clock)
    user = await ana(app)
    [fact] = await app.store.facts(user.id, KOLDO)
    await app.memory.delete(user, KOLDO, fact.id)
    [(_, text)] = stored_journey(app)
    assert text == "Koldo la tranquilizó."  # each sentence cited one of the two turns


async def test_a_group_never_shows_a_journey_and_journey_false_hides_one(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await two_conversations(app, fake_anthropic, clock)
    await app.companion.handle(group("Hola a todos", user="u1", name="Ana"))
    assert "Lisboa" not in block2(fake_anthropic.bodies()[-1])  # Ana's own, but a group
    koldo = app.characters.get(KOLDO)
    assert koldo is not None
    others = {c: app.characters.get(c) for c in app.characters.ids()}
    app.characters.replace_with(
        CharacterBook({**others, KOLDO: koldo.model_copy(update={"journey": False})})  # type: ignore[dict-item]
    )
    await end_by_timer(app, clock)
    await app.companion.handle(dm("Hola de nuevo"))
    assert "Lisboa" not in block2(fake_anthropic.bodies()[-1])
    assert stored_journey(app)  # hidden, not deleted: turned back on, it is there


async def test_an_export_holds_only_the_exporting_persons_journey(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await two_conversations(app, fake_anthropic, clock)
    await app.companion.handle(dm("Hoy he plantado tomates", user="u2", name="Bea"))
    said = turn_ids(app)[-1]
    fake_anthropic.queue(
        chronicle(f"Bea plantó tomates {{cite:{said}}} en su huerta."), route=ROUTE
    )
    await end_by_timer(app, clock)
    assert len(stored_journey(app)) == 2
    data = await app.memory.export(await ana(app), KOLDO)
    assert len(data["journeys"]) == 1 and "Lisboa" in data["journeys"][0]["text"]
    assert "tomates" not in str(data)


async def test_an_imported_journey_is_masked_and_must_be_prose(
    app: App, fake_anthropic: FakeAnthropic, clock: FakeClock
) -> None:
    await two_conversations(app, fake_anthropic, clock)
    data = await app.memory.export(await ana(app), KOLDO)
    story = data["journeys"][0]["text"]
    other = await app.store.upsert_user("telegram", "u9", "Eva", clock())
    listed = {**data, "journeys": [{**data["journeys"][0], "text": f"- {story}"}]}
    await app.memory.import_(other, KOLDO, listed)
    assert await app.store.journey(other.id, KOLDO) is None  # a list is refused whole
    card = "Ana pagó el billete con la tarjeta 4111 1111 1111 1111, sin dudar."
    masked = {**data, "journeys": [{**data["journeys"][0], "text": f"{story} {card}"}]}
    await app.memory.import_(other, KOLDO, masked)
    imported = await app.store.journey(other.id, KOLDO)
    assert imported is not None and "Lisboa" in imported.text and "billete" in imported.text
    assert "4111" not in imported.text
