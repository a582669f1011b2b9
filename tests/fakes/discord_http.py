"""What every route of the fake Discord REST API shares: the URL prefix, JSON answers as
discord.py parses them, request bodies (JSON or multipart), and how an edit applies."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web

from tests.fakes.discord_records import RecordedRequest, UploadedFile
from tests.fakes.discord_world import JSON, LOADING, now_iso

API = r"/api/v{version:\d+}"
OCTET_STREAM = "application/octet-stream"
JSON_TYPE = "application/json"
RECORD = web.RequestKey("record", RecordedRequest)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def json_response(data: object, status: int = 200) -> web.Response:
    # discord.py parses a body as JSON only if Content-Type is exactly "application/json";
    # aiohttp's json_response appends "; charset=utf-8", which discord.py then treats as text.
    return web.Response(body=json.dumps(data).encode(), status=status, content_type=JSON_TYPE)


def error(status: int, message: str, code: int = 0) -> web.Response:
    return json_response({"message": message, "code": code}, status=status)


async def read_body(request: web.Request) -> tuple[Any, list[UploadedFile]]:
    """The JSON body, or payload_json plus files for the multipart form discord.py uploads."""
    payload: Any = {}
    files: list[UploadedFile] = []
    if request.content_type.startswith("multipart/"):
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if not isinstance(part, aiohttp.BodyPartReader):
                continue
            if part.name == "payload_json":
                payload = json.loads(await part.text())
            else:
                data = bytes(await part.read())
                ctype = part.headers.get("Content-Type")
                files.append(UploadedFile(part.name or "", part.filename, ctype, data))
    else:
        raw = await request.read()
        payload = json.loads(raw) if raw else {}
    request[RECORD].body = payload
    return payload, files


def apply_edit(message: JSON, payload: JSON) -> None:
    for key, empty in (("content", ""), ("embeds", []), ("components", [])):
        if key in payload:
            # An explicit null removes the field's value, as on Discord.
            message[key] = empty if payload[key] is None else payload[key]
    # Editing a deferred response is what ends its "thinking..." state.
    message["flags"] = int(message.get("flags") or 0) & ~LOADING
    message["edited_timestamp"] = now_iso()
