"""The engine driven through the real anthropic SDK against the fake Messages API."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from bot.app import App, open_app
from memory.engine.tokens import TokenEstimator
from memory.models import SummaryFields
from memory.summary.format import format_summary
from tests.conftest import FakeClock, make_settings
from tests.fakes.anthropic_api import Error, Text, ToolUse
from tests.helpers import (
    as_bytes,
    cached_prefix,
    dm,
    flat_blocks,
    strip_cache,
    summary_input,
)
from tests.raw_db import raw_database


async def test_user_turn_is_stored_before_the_llm_is_called(app: App, fake_anthropic) -> None:
    seen: list[list[tuple[str, str]]] = []

    def answer(body: dict[str, Any]) -> Text:
        with raw_database(app.settings) as raw:
            seen.append(raw.execute("SELECT role, text FROM turns ORDER BY id").fetchall())
        return Text("Siéntate.")

    fake_anthropic.queue(answer)
    reply = await app.companion.handle(dm("Vengo por lo de mi hermano"))
    assert reply.ok and reply.text == "Siéntate."
    assert seen == [[("user", "Vengo por lo de mi hermano")]]


async def test_block_order_and_cache_breakpoints(app: App, fake_anthropic) -> None:
    fake_anthropic.queue(Text("Siéntate."), Text("Cuenta."))
    await app.companion.handle(dm("Hola"))
    await app.companion.handle(dm("Mi hermano ha desaparecido"))
    body = fake_anthropic.bodies()[-1]
    system = body["system"]
    assert system[0]["text"].startswith("Eres Koldo Arrieta")
    assert "Todavía no sabes nada de Ana" in system[1]["text"]
    assert system[2]["text"].startswith("## La conversación hasta ahora")
    # The test sheet, with the tool definitions before it, is far below the provider's 1,024
    # tokens: no system breakpoint (test_prompt.py covers where they are placed).
    assert not any("cache_control" in block for block in system)
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    breakpoints = [
        (i, j)
        for i, m in enumerate(body["messages"])
        for j, block in enumerate(m["content"])
        if "cache_control" in block
    ]
    assert breakpoints == [(4, 0)]  # the newest user text: it repeats in the next request
    assert sum(1 for b in system if "cache_control" in b) + len(breakpoints) <= 4
    last = body["messages"][-1]["content"]
    assert last[0]["text"] == "Mi hermano ha desaparecido"
    assert last[1]["text"].startswith("Ahora, en la hora local de Ana: lunes 2026-11-02 18:30")
    assert last[2]["text"].splitlines()[0] == "Recuerda: eres Koldo Arrieta."
    assert len(last[2]["text"].splitlines()) == 3


async def test_each_request_extends_the_previous_cached_prefix(app: App, fake_anthropic) -> None:
    for i in range(10):  # below the compaction trigger: the window only grows
        await app.companion.handle(dm(f"mensaje {i}"))
    bodies = fake_anthropic.bodies()
    assert len(bodies) == 10
    for before, after in itertools.pairwise(bodies):
        system_before, prefix_before = cached_prefix(before)
        assert strip_cache(after["system"]) == system_before
        head = flat_blocks(after)[: len(prefix_before)]
        assert as_bytes(head) == as_bytes(prefix_before)
        assert len(flat_blocks(after)) > len(prefix_before)


async def test_compaction_folds_the_window_and_keeps_the_last_turns(
    app: App, fake_anthropic
) -> None:
    trigger = app.settings.window_trigger_turns
    keep = app.settings.window_keep_turns

    def summarise(body: dict[str, Any]) -> ToolUse:
        text = body["messages"][0]["content"][0]["text"]
        first_id = int(text.split("Turns to fold in:\n[")[1].split("]")[0])
        return ToolUse(
            "write_summary",
            summary_input(
                established_facts=[f"Ana busca a su hermano {{cite:{first_id}}}"],
                canon=[f"El pedido es el 48213 {{cite:{first_id}}}"],
                tone=["tenso, porque el hermano no aparece"],
            ),
        )

    fake_anthropic.queue(summarise, route="write_summary")
    for i in range(trigger // 2):
        await app.companion.handle(dm(f"mensaje {i}"))
    await app.companion.drain()
    assert len(fake_anthropic.bodies("write_summary")) == 1
    summary_body = fake_anthropic.bodies("write_summary")[0]
    assert summary_body["tool_choice"] == {"type": "tool", "name": "write_summary"}
    assert "temperature" not in summary_body  # API 2026-10-21 rejects sampling parameters
    await app.companion.handle(dm("¿Sigues ahí?"))
    body = fake_anthropic.bodies()[-1]
    assert "Ana busca a su hermano {cite:1}" in body["system"][2]["text"]
    reminder = body["messages"][-1]["content"][-1]["text"]
    assert "Tono actual: tenso, porque el hermano no aparece" in reminder
    window_texts = [block["text"] for m in body["messages"] for block in m["content"]]
    assert "mensaje 0" not in window_texts
    kept_turns = keep + 2  # the kept window plus the new exchange
    assert f"mensaje {trigger // 2 - 1}" in window_texts
    assert len(body["messages"]) == 2 + kept_turns - 1  # opening pair + window + new user turn


async def test_invented_citation_is_retried_then_accepted(app: App, fake_anthropic) -> None:
    fake_anthropic.queue(
        ToolUse("write_summary", summary_input(established_facts=["inventado {cite:99999}"])),
        ToolUse("write_summary", summary_input(established_facts=["Ana tiene un gato {cite:1}"])),
        route="write_summary",
    )
    for i in range(app.settings.window_trigger_turns // 2):
        await app.companion.handle(dm(f"mensaje {i}"))
    await app.companion.drain()
    summary = await app.store.latest_summary(next(iter(app.companion._sessions._sessions)))
    assert summary is not None
    assert summary.fields.established_facts == ("Ana tiene un gato {cite:1}",)
    failures = [r for r in await app.store.usage_records() if r.kind == "summary" and not r.ok]
    assert len(failures) == 1 and "99999" in (failures[0].error or "")


async def test_all_attempts_invalid_keeps_the_previous_summary(app: App, fake_anthropic) -> None:
    fake_anthropic.queue(
        Text("esto no es JSON"),
        ToolUse("write_summary", {"tono": ["x"]}),
        ToolUse("write_summary", summary_input(canon=["{cite:424242}"])),
        route="write_summary",
    )
    for i in range(app.settings.window_trigger_turns // 2):
        await app.companion.handle(dm(f"mensaje {i}"))
    await app.companion.drain()
    thread = next(iter(app.companion._sessions._sessions))
    assert await app.store.latest_summary(thread) is None
    errors = [r.error for r in await app.store.usage_records() if r.kind == "summary"]
    assert len(errors) == 3
    assert "not JSON" in errors[0] and "unknown fields ['tono']" in errors[1]
    assert "424242" in errors[2]
    # nothing lost: the whole window is still sent literally
    await app.companion.handle(dm("sigo aquí"))
    texts = [b["text"] for m in fake_anthropic.bodies()[-1]["messages"] for b in m["content"]]
    assert "mensaje 0" in texts


async def test_llm_failure_keeps_the_turn_and_apologises(app: App, fake_anthropic) -> None:
    fake_anthropic.queue(Error(500), Text("Ahora sí."))
    reply = await app.companion.handle(dm("¿Estás?"))
    assert not reply.ok and "Perdona" in reply.text
    with raw_database(app.settings) as raw:
        assert raw.execute("SELECT role, text FROM turns").fetchall() == [("user", "¿Estás?")]
        usage = raw.execute("SELECT kind, ok, error FROM llm_usage").fetchall()
    assert usage[0][:2] == ("reply", 0) and "500" in usage[0][2]
    reply = await app.companion.handle(dm("¿Y ahora?"))
    assert reply.ok and reply.text == "Ahora sí."
    last = fake_anthropic.bodies()[-1]["messages"][-1]["content"]
    assert [b["text"] for b in last[:-2]] == ["¿Estás?", "¿Y ahora?"]


async def test_one_users_messages_are_handled_in_order(app: App, fake_anthropic) -> None:
    replies = await asyncio.gather(*(app.companion.handle(dm(f"m{i}")) for i in range(5)))
    assert all(r.ok for r in replies)
    with raw_database(app.settings) as raw:
        rows = raw.execute("SELECT role, text FROM turns ORDER BY id").fetchall()
    assert [t for r, t in rows if r == "user"] == [f"m{i}" for i in range(5)]
    # Arriving at once, they are one burst: one call answers them all, on the newest.
    assert [r for r, _ in rows] == ["user"] * 5 + ["assistant"]
    assert [bool(r.text) for r in replies] == [False] * 4 + [True]
    assert len(fake_anthropic.bodies()) == 1


async def test_inactivity_starts_a_new_conversation_but_keeps_the_thread(
    app: App, fake_anthropic, clock: FakeClock
) -> None:
    await app.companion.handle(dm("primera"))
    clock.advance(hours=3)
    await app.companion.handle(dm("segunda"))
    with raw_database(app.settings) as raw:
        conversations = raw.execute(
            "SELECT id, end_reason, ended_at FROM conversations ORDER BY id"
        ).fetchall()
    assert len(conversations) == 2
    assert conversations[0][1] == "inactivity"
    assert conversations[0][2].startswith("2026-11-02T19:00")  # last activity + the timeout
    assert conversations[1][1] is None
    body = fake_anthropic.bodies()[-1]
    texts = [b["text"] for m in body["messages"] for b in m["content"]]
    assert "primera" in texts
    assert "Último mensaje anterior de Ana: hace 3 h." in body["messages"][-1]["content"][1]["text"]


async def test_sdk_retries_overload_and_rate_limits(tmp_path, fake_anthropic, clock) -> None:
    from bot.app import open_app
    from tests.conftest import make_settings

    settings = make_settings(tmp_path, fake_anthropic, llm_max_retries=2)
    fake_anthropic.queue(
        Error(529, "overloaded_error"), Error(429, "rate_limit_error"), Text("Ya está.")
    )
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        reply = await app.companion.handle(dm("hola"))
        usage = await app.store.usage_records()
    assert reply.ok and reply.text == "Ya está."
    assert len(fake_anthropic.requests) == 3
    assert [(u.kind, u.ok) for u in usage] == [("reply", True)]


async def test_a_restart_rebuilds_the_session_from_the_store(
    tmp_path, fake_anthropic, clock
) -> None:
    from bot.app import open_app
    from tests.conftest import make_settings

    settings = make_settings(tmp_path, fake_anthropic)
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        await app.companion.handle(dm("Me llamo Ana y busco a Iñaki"))
    clock.advance(minutes=5)
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        await app.companion.handle(dm("¿Te acuerdas?"))
    first, second = fake_anthropic.bodies()
    _, first_prefix = cached_prefix(first)
    assert as_bytes(flat_blocks(second)[: len(first_prefix)]) == as_bytes(first_prefix)
    texts = [b["text"] for m in second["messages"] for b in m["content"]]
    assert "Me llamo Ana y busco a Iñaki" in texts and "Entendido." in texts


async def test_a_new_display_name_reaches_the_store_despite_the_user_cache(
    app: App, fake_anthropic
) -> None:
    await app.companion.handle(dm("Hola", name="Ana"))
    await app.companion.handle(dm("Sigo aquí", name="Ana"))
    await app.companion.handle(dm("Ahora con otro nombre", name="Ana María"))
    with raw_database(app.settings) as raw:
        rows = raw.execute("SELECT platform_user_id, display_name FROM users").fetchall()
    assert rows == [("u1", "Ana María")]  # one row: the cache never made a second user


async def test_each_reply_is_stored_with_what_it_was_built_from(app: App, fake_anthropic) -> None:
    await app.companion.handle(dm("Primera"))
    await app.companion.handle(dm("Segunda"))
    with raw_database(app.settings) as raw:
        replies = [r[0] for r in raw.execute("SELECT id FROM turns WHERE role = 'assistant'")]
        sources = raw.execute(
            "SELECT turn_id, window_turn_ids FROM reply_sources ORDER BY turn_id"
        ).fetchall()
    assert [turn_id for turn_id, _ in sources] == replies
    # The second reply was built from the whole window up to the user's second turn.
    assert sources[1][1] == f"[{replies[0] - 1}, {replies[0]}, {replies[1] - 1}]"


async def test_a_failed_compaction_waits_before_trying_again(app: App, fake_anthropic) -> None:
    """While the summary model fails, compaction is not retried on every message, only after
    the window has grown by another `window_keep_turns` turns; then it succeeds."""
    failing = [Text("esto no es JSON")] * 3  # one compaction's three attempts
    fake_anthropic.queue(*failing, route="write_summary")
    for i in range(app.settings.window_trigger_turns // 2):
        await app.companion.handle(dm(f"mensaje {i}"))
        await app.companion.drain()
    assert len(fake_anthropic.bodies("write_summary")) == 3
    for i in range(app.settings.window_keep_turns // 2 - 1):  # not yet grown enough
        await app.companion.handle(dm(f"más {i}"))
        await app.companion.drain()
    assert len(fake_anthropic.bodies("write_summary")) == 3
    await app.companion.handle(dm("y uno más"))
    await app.companion.drain()
    assert len(fake_anthropic.bodies("write_summary")) == 4  # tried again, and it folded
    thread = next(iter(app.companion._sessions._sessions))
    assert await app.store.latest_summary(thread) is not None


def first_folded_id(body: dict[str, Any]) -> int:
    text = body["messages"][0]["content"][0]["text"]
    return int(text.split("Turns to fold in:\n[")[1].split("]")[0])


async def test_a_summary_over_its_cap_is_stored_trimmed(app: App, fake_anthropic) -> None:
    """The summariser's output is trimmed to SUMMARY_CAP_TOKENS before it is stored (what
    `/memoria ver` shows and the next compaction builds on), least durable claims first."""

    def summarise(body: dict[str, Any]) -> ToolUse:
        cite = f"{{cite:{first_folded_id(body)}}}"
        threads = [f"Queda pendiente el asunto número {i} del puerto {cite}" for i in range(80)]
        return ToolUse(
            "write_summary",
            summary_input(open_threads=threads, canon=[f"Ana vive en Getxo {cite}"]),
        )

    fake_anthropic.queue(summarise, route="write_summary")
    for i in range(app.settings.window_trigger_turns // 2):
        await app.companion.handle(dm(f"mensaje {i}"))
    await app.companion.drain()
    with raw_database(app.settings) as raw:
        [(stored,)] = raw.execute("SELECT fields_json FROM summaries").fetchall()
    fields = SummaryFields(**{name: tuple(claims) for name, claims in json.loads(stored).items()})
    assert TokenEstimator().count(format_summary(fields, "es")) <= app.settings.summary_cap_tokens
    assert fields.canon[0].startswith("Ana vive en Getxo")
    assert 0 < len(fields.open_threads) < 80
    assert fields.open_threads[-1].startswith("Queda pendiente el asunto número 79")


async def test_long_messages_fold_before_the_turn_trigger(tmp_path, fake_anthropic, clock) -> None:
    """The window is compacted when its tokens pass BUDGET_WINDOW_TOKENS, however few turns."""
    settings = make_settings(tmp_path, fake_anthropic, budget_window_tokens=200)
    fake_anthropic.queue(
        lambda body: ToolUse(
            "write_summary",
            summary_input(established_facts=[f"Ana habla largo {{cite:{first_folded_id(body)}}}"]),
        ),
        route="write_summary",
    )
    async with open_app(settings, clock=clock, start_scheduler=False) as app:
        long_text = " ".join(f"palabra{i}" for i in range(120))
        messages = app.settings.window_keep_turns // 2 + 2  # enough to fold beyond the kept
        for _ in range(messages):
            await app.companion.handle(dm(long_text))
            await app.companion.drain()
        assert app.settings.window_trigger_turns > 2 * messages  # far from the turn trigger
        assert len(fake_anthropic.bodies("write_summary")) >= 1
