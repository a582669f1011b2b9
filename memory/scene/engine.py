"""A group's scene as one shared conversation: people's messages and every character's line go
to each character present, and the characters chosen by memory/scene/routing.py answer.

Each character present keeps its own copy of the scene in a thread of its own (owned by the
scene's row in `users`): its window, summary, compactions and search are a private thread's,
so the prompt stays bounded, the cache layout holds per character, and a character that joins
later has no copy of what was said before it came. A person's line is stored in every present
character's thread with its speaker; a character's line is its own reply in its thread and a
named line in the others'.

A scene is one queue: its turns run one at a time under the scene's lock, in arrival order.
Messages that arrive while a turn is under way (or while the rate limit holds the call) join
the next turn's burst, stored in order, answered together on the newest one.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from memory.engine.bursts import CallGate
from memory.engine.llm import TextSink
from memory.engine.session import SessionCache
from memory.engine.session_book import SessionBook
from memory.engine.turns import TurnTaker
from memory.errors import UserFacingError
from memory.models import Reply, Speaker, Thread, User, UserTurn
from memory.scene.past_turns import EarlierRun, answered_last, earlier_run
from memory.scene.routing import Castmember, Heard, addressed, first_speakers, next_speaker

log = logging.getLogger(__name__)

SceneKey = tuple[str, str]  # platform, channel id
MAX_NAME = 64  # a display name as the witnesses read it


@dataclass(frozen=True)
class SceneMessage:
    """A person's message to a scene, as the bot layer hands it over."""

    platform: str
    channel_id: str
    person: str  # the platform's user id
    display_name: str
    text: str
    cast: tuple[str, ...]  # the characters present, in the order they joined
    platform_message_id: str | None = None
    replied_to: str | None = None  # the character whose line this replies to

    @property
    def key(self) -> SceneKey:
        return (self.platform, self.channel_id)

    @property
    def scope(self) -> str:
        return scene_scope(self.platform, self.channel_id)

    @property
    def source_key(self) -> str | None:
        if self.platform_message_id is None:
            return None
        return f"{self.platform}:{self.channel_id}:{self.platform_message_id}"


def scene_scope(platform: str, channel_id: str) -> str:
    return f"scene:{platform}:{channel_id}"


def scene_owner_id(channel_id: str) -> str:
    """The platform user id of a scene's own row in `users` (no platform user id has a colon)."""
    return f"scene:{channel_id}"


class LineSink(Protocol):
    """Where a turn's lines go: the group, as each character (bot/scenes.py)."""

    def live(self, character_id: str) -> TextSink | None:
        """Shows the line while the model writes it (streaming), or None."""
        ...

    async def send(self, character_id: str, reply: Reply) -> None: ...


@dataclass(frozen=True)
class SceneLine:
    character_id: str
    reply: Reply


@dataclass(eq=False)
class _Burst:
    key: SceneKey
    messages: list[SceneMessage]
    sinks: list[LineSink]
    done: asyncio.Future[tuple[SceneLine, ...]]
    stored: int = 0
    held: bool = False
    closed: bool = False
    redelivered: bool = True  # every message was stored before (a redelivery after a crash)
    newest_turns: dict[str, int] = field(default_factory=dict)  # copy -> newest message's turn
    first_turns: dict[str, int] = field(default_factory=dict)  # copy -> first message's turn
    newest_person: int = 0  # the `users` row of the newest message's author


@dataclass
class _SceneState:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    open: _Burst | None = None
    # Who each person last spoke with, as this process saw it; read from the copies when a
    # person is missing (a restart) or after another worker answered the scene.
    last_partner: dict[str, str] = field(default_factory=dict)  # person -> character


class SceneEngine:
    """The scenes of every group, as one queue each."""

    def __init__(
        self,
        book: SessionBook,
        sessions: SessionCache,
        turns: TurnTaker,
        clock: Callable[[], datetime],
        max_replies: int,
        seed: int | None = None,
        max_scenes: int = 2000,
    ) -> None:
        self._book = book
        self._sessions = sessions
        self._turns = turns
        self._clock = clock
        self._max_replies = max_replies
        self._rng = random.Random(seed)
        self._max_scenes = max_scenes
        self._scenes: OrderedDict[SceneKey, _SceneState] = OrderedDict()

    def submit(
        self,
        message: SceneMessage,
        sink: LineSink,
        gate: CallGate | None = None,
        on_held: Callable[[float], Awaitable[None]] | None = None,
    ) -> Awaitable[tuple[SceneLine, ...]]:
        """Join the message to its scene's next turn now (arrival order is the order of the
        calls), and return the wait for that turn's lines; only the newest message of a turn
        gets them (the others get none: nothing more to send)."""
        if not message.text.strip():
            raise UserFacingError("There is no text in that message to answer.", code="empty")
        if not message.cast:
            raise UserFacingError("No character is present in this group.", code="no_cast")
        state = self._state(message.key)
        burst, leads = self._join(state, message, sink)
        return asyncio.ensure_future(self._answer(state, burst, message, leads, gate, on_held))

    def reread(self, platform: str, channel_id: str) -> None:
        """Another process answered this scene since this one did: who spoke with whom is
        read from the copies again."""
        state = self._scenes.get((platform, channel_id))
        if state is not None:
            state.last_partner.clear()

    def waiting(self) -> int:
        """People's messages whose scene turn has not begun."""
        return sum(len(s.open.messages) for s in self._scenes.values() if s.open is not None)

    def _state(self, key: SceneKey) -> _SceneState:
        state = self._scenes.get(key)
        if state is None:
            state = self._scenes[key] = _SceneState()
            for old in list(self._scenes)[: max(0, len(self._scenes) - self._max_scenes)]:
                if not self._scenes[old].lock.locked() and self._scenes[old].open is None:
                    del self._scenes[old]  # its next message reads who spoke last again
        self._scenes.move_to_end(key)
        return state

    def _join(
        self, state: _SceneState, message: SceneMessage, sink: LineSink
    ) -> tuple[_Burst, bool]:
        burst = state.open
        if burst is not None:
            burst.messages.append(message)
            burst.sinks.append(sink)
            return burst, False
        future: asyncio.Future[tuple[SceneLine, ...]] = asyncio.get_running_loop().create_future()
        state.open = _Burst(message.key, [message], [sink], future)
        return state.open, True

    async def _answer(
        self,
        state: _SceneState,
        burst: _Burst,
        message: SceneMessage,
        leads: bool,
        gate: CallGate | None,
        on_held: Callable[[float], Awaitable[None]] | None,
    ) -> tuple[SceneLine, ...]:
        if leads:
            try:
                burst.done.set_result(await self._lead(state, burst, gate, on_held))
            except BaseException as exc:
                self._close(state, burst)
                if isinstance(exc, asyncio.CancelledError):
                    burst.done.cancel()
                    raise
                burst.done.set_exception(exc)
        elif burst.held and not burst.closed:
            async with state.lock:  # stored now, not after the wait
                await self._store_pending(burst)
        try:
            lines = await asyncio.shield(burst.done)
        except Exception:
            if message is burst.messages[-1]:  # the turn's failure is told once, on its newest
                raise
            return ()
        return lines if message is burst.messages[-1] else ()

    def _close(self, state: _SceneState, burst: _Burst) -> None:
        burst.closed = True
        if state.open is burst:
            state.open = None

    async def _lead(
        self,
        state: _SceneState,
        burst: _Burst,
        gate: CallGate | None,
        on_held: Callable[[float], Awaitable[None]] | None,
    ) -> tuple[SceneLine, ...]:
        """Store the burst's messages in every present character's copy, wait for the gate,
        then let the chosen characters speak."""
        notified = False
        while True:
            async with state.lock:
                await self._store_pending(burst)
                wait = await gate.take(f"scene:{burst.key[0]}:{burst.key[1]}") if gate else 0.0
                if wait <= 0:
                    await self._store_pending(burst)  # those that joined while the gate answered
                    self._close(state, burst)  # no await since the last store: none is left
                    return await self._speak(state, burst)
                burst.held = True
            if on_held is not None and not notified:
                notified = True
                await on_held(wait)
            assert gate is not None
            await gate.wait(wait)

    # ---- storing what people said -------------------------------------------------------------

    async def _owner(self, key: SceneKey) -> User:
        return await self._book.user(key[0], scene_owner_id(key[1]), "")

    async def _store_pending(self, burst: _Burst) -> None:
        """The burst's messages not yet stored, in arrival order, into every present
        character's copy of the scene (under the scene's lock)."""
        owner = await self._owner(burst.key)
        while burst.stored < len(burst.messages):
            message = burst.messages[burst.stored]
            now = self._clock()
            person = await self._book.user(message.platform, message.person, message.display_name)
            speaker = Speaker(_name(message.display_name), person_id=person.id)
            burst.newest_turns, burst.newest_person = {}, person.id
            for character_id in message.cast:
                thread = Thread(owner.id, character_id, message.scope)
                said = message.text, speaker, now, message.platform_message_id, message.source_key
                stored = await self._store_line(owner, thread, *said)
                burst.redelivered = burst.redelivered and stored.existed
                burst.newest_turns[character_id] = stored.turn.id
                burst.first_turns.setdefault(character_id, stored.turn.id)
            burst.stored += 1

    async def _store_line(
        self,
        owner: User,
        thread: Thread,
        text: str,
        speaker: Speaker,
        now: datetime,
        message_id: str | None = None,
        key: str | None = None,
    ) -> UserTurn:
        """One line into one character's copy (found instead when stored before: same source)."""
        async with self._sessions.lock(thread):
            session = await self._book.session(owner, thread, now)
            session.previous_activity = session.last_activity
            session, stored = await self._turns.add_line(
                session, text, now, message_id, key, speaker
            )
            session.last_activity = now
            if speaker.person_id is not None and speaker.person_id not in session.profile.people:
                await self._book.reread_profile(session, now)
            self._turns.compact_if_due(session, self._book.character(thread.character_id))
        return stored

    # ---- the characters' lines ----------------------------------------------------------------

    async def _speak(self, state: _SceneState, burst: _Burst) -> tuple[SceneLine, ...]:
        newest = burst.messages[-1]
        owner = await self._owner(burst.key)
        before = EarlierRun()
        if burst.redelivered:
            found = await earlier_run(
                self._turns.lines_after, owner.id, newest.scope, burst.newest_turns
            )
            if found is None:
                log.info("scene %s: stored before and answered; not answered again", burst.key)
                return ()
            before = found
            log.info("scene %s: run again; %d line(s) spoken before", burst.key, len(found.spoken))
        cast = [self._castmember(character_id) for character_id in newest.cast]
        heard = [Heard(m.text, m.replied_to) for m in burst.messages]
        partner = before.first_speaker() or state.last_partner.get(newest.person)
        if partner is None and not addressed(heard, cast):  # only "nobody named" asks
            partner = await self._last_partner(owner, burst)
        queue = first_speakers(heard, cast, partner, self._rng, self._max_replies)
        lines: list[SceneLine] = []
        while queue and len(lines) < self._max_replies:
            character_id = queue.pop(0)
            if character_id in before.spoken:
                reply = await self._spoken_before(owner, character_id, newest, before)
            else:
                reply = await self._line_of(owner, character_id, newest, burst.sinks[-1])
            lines.append(SceneLine(character_id, reply))
            await burst.sinks[-1].send(character_id, reply)
            if not reply.ok:
                continue
            spoken = [line.character_id for line in lines]
            handed = next_speaker(reply.text, character_id, cast, spoken)
            if handed is not None and handed not in queue:
                queue.append(handed)
        if lines:
            for message in burst.messages:
                state.last_partner[message.person] = lines[0].character_id
        return tuple(lines)

    async def _last_partner(self, owner: User, burst: _Burst) -> str | None:
        """Who the newest message's author last spoke with in this scene, read from the
        copies' windows (so a restart or another worker answers as the last one would)."""
        scope = burst.messages[-1].scope
        found: list[tuple[datetime, str]] = []
        for character_id, first_turn in burst.first_turns.items():
            thread = Thread(owner.id, character_id, scope)
            async with self._sessions.lock(thread):
                window = (await self._book.session(owner, thread, self._clock())).window
            said = answered_last(window, character_id, burst.newest_person, first_turn)
            if said is not None:
                found.append(said)
        return max(found)[1] if found else None

    async def _spoken_before(
        self, owner: User, character_id: str, newest: SceneMessage, before: EarlierRun
    ) -> Reply:
        """A line the turn's first run stored: said again as it was (no model call), and
        copied to the others present whose copies lack it."""
        turn = before.spoken[character_id]
        speaker = Speaker(self._book.character(character_id).name, character_id=character_id)
        for other in before.missing_witnesses(character_id, newest.cast):
            witness = Thread(owner.id, other, newest.scope)
            await self._store_line(owner, witness, turn.text, speaker, self._clock())
        return Reply(turn.text, turn_id=turn.id)

    def _castmember(self, character_id: str) -> Castmember:
        character = self._book.character(character_id)
        return Castmember(character.id, character.names_in_scene(), character.talkativeness)

    async def _line_of(
        self, owner: User, character_id: str, newest: SceneMessage, sink: LineSink
    ) -> Reply:
        """The character's line: its reply in its own copy, then a named line in the copies
        of the others present."""
        character = self._book.character(character_id)
        thread = Thread(owner.id, character_id, newest.scope)
        async with self._sessions.lock(thread):
            now = self._clock()
            session = await self._book.session(owner, thread, now)
            answered = next(t for t in reversed(session.window) if t.role == "user")
            live = sink.live(character_id)
            reply = await self._turns.reply(session, character, answered, now, live)
        if reply.ok:
            speaker = Speaker(character.name, character_id=character.id)
            for other in newest.cast:
                if other != character_id:
                    witness = Thread(owner.id, other, newest.scope)
                    await self._store_line(owner, witness, reply.text, speaker, now)
        return reply


def _name(display_name: str) -> str:
    """A display name as the witnesses read it: one line, bounded."""
    name = " ".join(display_name.split())[:MAX_NAME]
    return name or "?"
