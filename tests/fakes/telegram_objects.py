"""Bot API JSON objects and request decoding shared by the fake Telegram server.

Kept free of any server state so a test can also build an unusual update by hand and pass it to
``FakeTelegram.push_update``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

JSON = dict[str, Any]

# Update kinds the real API leaves out unless `allowed_updates` asks for them explicitly.
DEFAULT_EXCLUDED_UPDATES = frozenset({"chat_member", "message_reaction", "message_reaction_count"})

CHAT_ACTIONS = frozenset(
    {
        "typing",
        "upload_photo",
        "record_video",
        "upload_video",
        "record_voice",
        "upload_voice",
        "upload_document",
        "choose_sticker",
        "find_location",
        "record_video_note",
        "upload_video_note",
    }
)

# PTB form-encodes every value: strings go raw, everything else as JSON. A text of "42" and the
# integer 42 therefore look identical on the wire, so fields that are always strings must never be
# JSON-decoded.
_STRING_FIELDS = frozenset(
    {
        "text",
        "caption",
        "parse_mode",
        "callback_query_id",
        "inline_message_id",
        "url",
        "action",
        "language_code",
        "description",
        "short_description",
        "name",
        "secret_token",
        "ip_address",
        "file_id",
        "emoji",
        "query",
        "business_connection_id",
        "message_effect_id",
    }
)


@dataclass(frozen=True)
class UploadedFile:
    """One multipart file part the bot uploaded."""

    filename: str | None
    content: bytes = field(repr=False)
    mime_type: str | None


class ApiError(Exception):
    """A Bot API error; PTB picks the exception class from the HTTP status, not the body."""

    def __init__(self, code: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.code = code
        self.description = description
        self.retry_after = retry_after

    def response(self) -> web.Response:
        body: JSON = {"ok": False, "error_code": self.code, "description": self.description}
        if self.retry_after is not None:
            body["parameters"] = {"retry_after": self.retry_after}
        return web.json_response(body, status=self.code)


def bad_request(description: str) -> ApiError:
    return ApiError(400, f"Bad Request: {description}")


def _decode_value(key: str, raw: str) -> Any:
    if key in _STRING_FIELDS:
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        # e.g. chat_id="@channel" or action="typing": a bare string that is not JSON.
        return raw


async def read_params(request: web.Request) -> JSON:
    """Parse query string, urlencoded, multipart or JSON bodies into one params dict."""
    params: JSON = {key: _decode_value(key, value) for key, value in request.query.items()}
    if request.content_type == "application/json":
        params.update(await request.json())
    elif request.body_exists:
        form = await request.post()
        for key, value in form.items():
            if isinstance(value, web.FileField):
                params[key] = UploadedFile(value.filename, value.file.read(), value.content_type)
            else:
                params[key] = _decode_value(key, str(value))
    # Secondary files (thumbnails, media groups) arrive as "attach://<part>" plus a named part.
    for key, value in list(params.items()):
        if isinstance(value, str) and value.startswith("attach://"):
            params[key] = params.pop(value.removeprefix("attach://"), value)
    return params


def utf16_len(text: str) -> int:
    # Entity offsets and lengths count UTF-16 code units, so an emoji counts as two.
    return len(text.encode("utf-16-le")) // 2


def entity_for(text: str, fragment: str, entity_type: str) -> JSON:
    """Entity covering the first occurrence of `fragment` in `text`."""
    index = text.index(fragment)
    return {"type": entity_type, "offset": utf16_len(text[:index]), "length": utf16_len(fragment)}


def make_user(
    user_id: int,
    first_name: str,
    *,
    username: str | None = None,
    is_bot: bool = False,
    language_code: str | None = None,
) -> JSON:
    user: JSON = {"id": user_id, "is_bot": is_bot, "first_name": first_name}
    if username:
        user["username"] = username
    if language_code and not is_bot:
        user["language_code"] = language_code
    return user


def make_chat(chat_id: int, chat_type: str, user: JSON, title: str | None = None) -> JSON:
    if chat_type == "private":
        chat: JSON = {"id": chat_id, "type": "private", "first_name": user["first_name"]}
        if "username" in user:
            chat["username"] = user["username"]
        return chat
    return {"id": chat_id, "type": chat_type, "title": title or f"Chat {chat_id}"}


def full_chat_info(chat: JSON) -> JSON:
    """getChat answers with ChatFullInfo, whose required fields PTB insists on."""
    gifts = dict.fromkeys(
        ("unlimited_gifts", "limited_gifts", "unique_gifts", "premium_subscription"), False
    )
    gifts["gifts_from_channels"] = False
    return {**chat, "accent_color_id": 0, "max_reaction_count": 11, "accepted_gift_types": gifts}


def make_message(message_id: int, chat: JSON, sender: JSON | None, **content: Any) -> JSON:
    message: JSON = {"message_id": message_id, "date": int(time.time()), "chat": chat}
    if sender is not None:
        message["from"] = sender
    message.update({key: value for key, value in content.items() if value is not None})
    return message


def make_sticker(file_id: str, emoji: str) -> JSON:
    return {
        "file_id": file_id,
        "file_unique_id": f"u{file_id}",
        "type": "regular",
        "width": 512,
        "height": 512,
        "is_animated": False,
        "is_video": False,
        "emoji": emoji,
    }


def make_photo_sizes(file_id: str, size: int | None) -> list[JSON]:
    """A thumbnail and a full size, largest last as the real API orders them; `size` None:
    the full size's file_size is left out, as the API may."""
    full: JSON = {"file_id": file_id, "file_unique_id": f"u{file_id}", "width": 800, "height": 600}
    if size is not None:
        full["file_size"] = size
    thumbnail = {"file_id": f"{file_id}_s", "file_unique_id": f"u{file_id}_s"}
    return [{**thumbnail, "width": 90, "height": 90}, full]


def update_kind(update: JSON) -> str:
    return next(key for key in update if key != "update_id")


def inline_markup(markup: Any) -> JSON | None:
    # Only inline keyboards are echoed back on a Message; reply keyboards are client-side state.
    if isinstance(markup, dict) and "inline_keyboard" in markup:
        return markup
    return None


def callback_datas(message: JSON) -> list[str]:
    keyboard = (message.get("reply_markup") or {}).get("inline_keyboard", [])
    return [
        button["callback_data"] for row in keyboard for button in row if "callback_data" in button
    ]


def check_markup(markup: Any) -> None:
    for row in (inline_markup(markup) or {}).get("inline_keyboard", []):
        for button in row:
            data = button.get("callback_data")
            if data is not None and not 1 <= len(str(data).encode()) <= 64:
                raise bad_request("BUTTON_DATA_INVALID")
            if set(button) <= {"text", "style", "icon_custom_emoji_id"}:
                raise bad_request("text buttons are unallowed in the inline keyboard")


def check_text(text: Any, limit: int = 4096) -> str:
    # The real limit applies after entity parsing; the raw length is close enough for tests.
    if not isinstance(text, str) or not text.strip():
        raise bad_request("message text is empty")
    if len(text) > limit:
        raise bad_request("message is too long")
    return text


def scope_key(scope: Any) -> str:
    """Flatten a BotCommandScope into a readable key: "default", "chat:42", ..."""
    if not isinstance(scope, dict):
        return "default"
    parts = [str(scope.get("type", "default"))]
    parts += [str(scope[name]) for name in ("chat_id", "user_id") if name in scope]
    return ":".join(parts)
