"""The fake Discord Gateway: HELLO, IDENTIFY -> READY + GUILD_CREATE, heartbeats, RESUME.

discord.py (without zstandard installed) connects with ``?v=10&encoding=json&compress=zlib-stream``
and only decompresses *binary* frames, so zlib-stream is honoured and any other value gets plain
text frames, which discord.py accepts unconditionally.
"""

from __future__ import annotations

import asyncio
import json
import uuid
import zlib
from contextlib import suppress
from enum import IntEnum

from aiohttp import WSMsgType, web

from tests.fakes.discord_records import Changes
from tests.fakes.discord_world import APPLICATION_FLAGS, JSON, FakeWorld

GUILD_MESSAGES, DIRECT_MESSAGES, MESSAGE_CONTENT = 1 << 9, 1 << 12, 1 << 15


class Op(IntEnum):
    DISPATCH = 0
    HEARTBEAT = 1
    IDENTIFY = 2
    PRESENCE_UPDATE = 3
    VOICE_STATE_UPDATE = 4
    RESUME = 6
    RECONNECT = 7
    REQUEST_GUILD_MEMBERS = 8
    INVALID_SESSION = 9
    HELLO = 10
    HEARTBEAT_ACK = 11


class GatewayConnection:
    """One websocket. Frames the client sent are kept in ``received`` for assertions."""

    def __init__(self, ws: web.WebSocketResponse, query: dict[str, str]) -> None:
        self.ws = ws
        self.query = query
        compress = query.get("compress")
        self._zlib = zlib.compressobj() if compress == "zlib-stream" else None
        # Sequence numbering and the shared zlib stream both break if two sends interleave.
        self._lock = asyncio.Lock()
        self.sequence = 0
        self.session_id: str | None = None
        self.identify: JSON | None = None
        self.ready = False
        self.received: list[JSON] = []
        self.close_code: int | None = None

    @property
    def intents(self) -> int:
        return int((self.identify or {}).get("intents", 0))

    async def send(self, op: Op, data: object, event: str | None = None) -> None:
        async with self._lock:
            frame: JSON = {"op": int(op), "d": data, "s": None, "t": None}
            if op is Op.DISPATCH:
                self.sequence += 1
                frame.update(s=self.sequence, t=event)
            text = json.dumps(frame)
            if self._zlib is None:
                await self.ws.send_str(text)
                return
            # Z_SYNC_FLUSH ends every frame with 00 00 ff ff, discord.py's end-of-message marker.
            body = self._zlib.compress(text.encode()) + self._zlib.flush(zlib.Z_SYNC_FLUSH)
            await self.ws.send_bytes(body)

    async def dispatch(self, event: str, data: JSON) -> None:
        await self.send(Op.DISPATCH, data, event)


def filter_for_intents(
    conn: GatewayConnection, world: FakeWorld, event: str, data: JSON
) -> JSON | None:
    """Drop or trim an event the way Discord does for the intents the client identified with."""
    if event != "MESSAGE_CREATE":
        return data
    in_guild = "guild_id" in data
    needed = GUILD_MESSAGES if in_guild else DIRECT_MESSAGES
    if not conn.intents & needed:
        return None
    mentioned = any(m["id"] == str(world.bot.id) for m in data.get("mentions", []))
    own = data["author"]["id"] == str(world.bot.id)
    if in_guild and not (conn.intents & MESSAGE_CONTENT or mentioned or own):
        data = {**data, "content": "", "embeds": [], "attachments": [], "components": []}
    return data


class FakeGateway:
    def __init__(self, world: FakeWorld, changes: Changes, token: str | None, heartbeat_ms: int):
        self.world = world
        self.changes = changes
        self.token = token
        self.heartbeat_ms = heartbeat_ms
        self.ws_url = ""
        self.connections: list[GatewayConnection] = []
        self.current: GatewayConnection | None = None
        self.resumes = 0
        # Events not delivered because of the client's intents, to explain a silent bot.
        self.suppressed: list[tuple[str, JSON]] = []
        self._sessions: dict[str, int] = {}

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        conn = GatewayConnection(ws, dict(request.query))
        self.connections.append(conn)
        try:
            await conn.send(Op.HELLO, {"heartbeat_interval": self.heartbeat_ms})
            async for msg in ws:
                if msg.type is WSMsgType.TEXT:
                    await self._on_frame(conn, json.loads(msg.data))
        except ConnectionResetError:
            pass  # the client went away mid-send; the close bookkeeping below still applies
        finally:
            conn.close_code = ws.close_code
            if conn.session_id:
                self._sessions[conn.session_id] = conn.sequence
            if self.current is conn:
                self.current = None
            self.changes.notify()
        return ws

    async def _on_frame(self, conn: GatewayConnection, frame: JSON) -> None:
        conn.received.append(frame)
        op, data = frame.get("op"), frame.get("d")
        if op == Op.HEARTBEAT:
            await conn.send(Op.HEARTBEAT_ACK, None)
        elif op == Op.IDENTIFY:
            await self._identify(conn, data)
        elif op == Op.RESUME:
            await self._resume(conn, data)
        elif op == Op.REQUEST_GUILD_MEMBERS:
            await self._members_chunk(conn, data)
        self.changes.notify()

    async def _identify(self, conn: GatewayConnection, data: JSON) -> None:
        if self.token is not None and data.get("token") != self.token:
            await conn.ws.close(code=4004, message=b"Authentication failed.")
            return
        conn.identify = data
        conn.session_id = uuid.uuid4().hex
        await conn.dispatch("READY", self._ready_payload(conn))
        # Discord sends guilds unavailable in READY and fills them in right after.
        await conn.dispatch("GUILD_CREATE", self.world.guild_create())
        self._make_current(conn)

    async def _resume(self, conn: GatewayConnection, data: JSON) -> None:
        session_id = data.get("session_id")
        token_ok = self.token is None or data.get("token") == self.token
        if session_id not in self._sessions or not token_ok:
            # d=false: not resumable, so discord.py starts over with a fresh IDENTIFY.
            await conn.send(Op.INVALID_SESSION, False)
            return
        conn.session_id = session_id
        conn.identify = self._identify_of(session_id)
        conn.sequence = int(data.get("seq") or self._sessions[session_id])
        self.resumes += 1
        await conn.dispatch("RESUMED", {})
        self._make_current(conn)

    async def _members_chunk(self, conn: GatewayConnection, data: JSON) -> None:
        guild = self.world.guild_create()
        chunk = {
            "guild_id": guild["id"],
            "members": guild["members"],
            "chunk_index": 0,
            "chunk_count": 1,
            "nonce": data.get("nonce"),
        }
        await conn.dispatch("GUILD_MEMBERS_CHUNK", chunk)

    def _identify_of(self, session_id: str) -> JSON | None:
        return next((c.identify for c in self.connections if c.session_id == session_id), None)

    def _make_current(self, conn: GatewayConnection) -> None:
        conn.ready = True
        self.current = conn

    def _ready_payload(self, conn: GatewayConnection) -> JSON:
        bot = {**self.world.bot.payload(), "verified": True, "mfa_enabled": False, "flags": 0}
        ready: JSON = {
            "v": 10,
            "user": bot,
            "guilds": [{"id": str(self.world.guild_id), "unavailable": True}],
            "session_id": conn.session_id,
            "session_type": "normal",
            "resume_gateway_url": self.ws_url,
            "application": {"id": str(self.world.application_id), "flags": APPLICATION_FLAGS},
            "private_channels": [],
            "relationships": [],
            "presences": [],
            "_trace": ["fake-discord"],
        }
        if conn.identify and "shard" in conn.identify:
            ready["shard"] = conn.identify["shard"]
        return ready

    async def wait_until_identified(self, seconds: float) -> GatewayConnection:
        def check() -> GatewayConnection | None:
            return self.current if self.current is not None and self.current.ready else None

        def what() -> str:
            return f"no identified gateway session; {len(self.connections)} connection(s) seen"

        return await self.changes.wait_for(check, seconds, what)

    async def dispatch(self, event: str, data: JSON, seconds: float = 5.0) -> bool:
        """Send an event to the identified client; False if its intents filtered it out."""
        conn = await self.wait_until_identified(seconds)
        filtered = filter_for_intents(conn, self.world, event, data)
        if filtered is None:
            self.suppressed.append((event, data))
            return False
        await conn.dispatch(event, filtered)
        return True

    async def drop(self, code: int = 4000) -> None:
        """Close the current connection as Discord does on a server-side hiccup."""
        if self.current is not None:
            conn, self.current = self.current, None
            await conn.ws.close(code=code)

    async def close_all(self) -> None:
        for conn in self.connections:
            with suppress(Exception):
                await conn.ws.close(code=1001)
