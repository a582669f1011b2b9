"""State and method implementations of the fake Bot API, without any HTTP.

Every method takes the decoded params and returns the ``result`` value or raises ``ApiError``.
Errors mirror the real API's wording where a bot is likely to branch on them (not modified,
message to edit not found, chat not found), so the adapter's error handling gets exercised.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from tests.fakes.telegram_html import parse_html
from tests.fakes.telegram_objects import (
    CHAT_ACTIONS,
    JSON,
    UploadedFile,
    bad_request,
    check_markup,
    check_text,
    full_chat_info,
    inline_markup,
    make_message,
    make_user,
    scope_key,
)

Handler = Callable[[JSON], Any]

_COMMAND_NAME = re.compile(r"^[a-z0-9_]{1,32}$")


def formatted(params: JSON) -> tuple[str, Any]:
    """The message's visible text and entities: parse_mode=HTML is parsed (and refused when
    it does not parse, as the real API does); without a parse mode the text is as sent."""
    mode = str(params.get("parse_mode") or "")
    if mode.upper() == "HTML":
        check_text(params.get("text"))
        text, entities = parse_html(params["text"])
        return check_text(text), entities or None
    if mode:
        raise bad_request(f"unsupported parse_mode {mode!r} in this fake")
    return check_text(params.get("text")), params.get("entities")


class BotApiMethods:
    """Everything the fake remembers, plus the synchronous Bot API methods."""

    def __init__(self, token: str, bot_user: JSON) -> None:
        self.token = token
        self.bot_user = bot_user
        self.calls: list[tuple[str, JSON]] = []
        self.unknown_methods: list[str] = []
        self.chats: dict[int, JSON] = {}
        # Current state of every message, user's and bot's, keyed by (chat_id, message_id).
        self.messages: dict[tuple[int, int], JSON] = {}
        self.chat_actions: list[JSON] = []
        self.commands: dict[tuple[str, str], list[JSON]] = {}
        self.documents: list[JSON] = []
        self.edited_messages: list[JSON] = []
        self.answered_callbacks: list[JSON] = []
        self.deleted_messages: list[tuple[int, int]] = []
        self.webhook: JSON | None = None
        # Each group's creator and administrators: chat id -> {user id: "creator"|"administrator"}.
        self.chat_admins: dict[int, dict[int, str]] = {}
        self.files: dict[str, tuple[str, bytes]] = {}
        # Files whose size the API does not tell (Telegram's file_size is optional).
        self.undeclared_sizes: set[str] = set()
        self._sent: list[JSON] = []
        self._pending: list[JSON] = []
        self._open_callbacks: set[str] = set()
        self._last_message_id = 0
        self._last_file_id = 0

    def method_table(self) -> dict[str, Handler]:
        """Lower-cased names, because the real API matches method names case-insensitively."""
        table: dict[str, Handler] = {
            "getMe": lambda _params: dict(self.bot_user),
            "deleteWebhook": self.delete_webhook,
            "setWebhook": self.set_webhook,
            "getWebhookInfo": self.get_webhook_info,
            "sendMessage": self.send_message,
            "sendChatAction": self.send_chat_action,
            "setMyCommands": self.set_my_commands,
            "getMyCommands": self.get_my_commands,
            "deleteMyCommands": self.delete_my_commands,
            "answerCallbackQuery": self.answer_callback_query,
            "editMessageText": self.edit_message_text,
            "editMessageReplyMarkup": self.edit_message_reply_markup,
            "sendDocument": self.send_document,
            "deleteMessage": self.delete_message,
            "getChat": lambda params: full_chat_info(self._chat_for(params)),
            "getFile": self.get_file,
            "getChatAdministrators": self.get_chat_administrators,
            "getChatMember": self.get_chat_member,
        }
        return {name.lower(): handler for name, handler in table.items()}

    def next_message_id(self) -> int:
        # One counter for all chats: simpler than per-chat ids and still unique per chat.
        self._last_message_id += 1
        return self._last_message_id

    def store_file(self, content: bytes, folder: str, suffix: str) -> str:
        self._last_file_id += 1
        file_id = f"file{self._last_file_id}"
        self.files[file_id] = (f"{folder}/{file_id}{suffix}", content)
        return file_id

    # -- webhook -------------------------------------------------------------------------------

    def delete_webhook(self, params: JSON) -> bool:
        self.webhook = None
        if params.get("drop_pending_updates"):
            self._pending.clear()
        return True

    def set_webhook(self, params: JSON) -> bool:
        if not params.get("url"):
            return self.delete_webhook(params)
        self.webhook = dict(params)
        if params.get("drop_pending_updates"):
            self._pending.clear()
        return True

    def get_webhook_info(self, _params: JSON) -> JSON:
        url = (self.webhook or {}).get("url", "")
        return {
            "url": url,
            "has_custom_certificate": False,
            "pending_update_count": len(self._pending),
        }

    # -- sending -------------------------------------------------------------------------------

    def send_message(self, params: JSON) -> JSON:
        chat = self._chat_for(params)
        text, entities = formatted(params)
        check_markup(params.get("reply_markup"))
        message = self._new_bot_message(chat, params, text=text, entities=entities)
        self._record_sent("sendMessage", message, params)
        return message

    def send_document(self, params: JSON) -> JSON:
        chat = self._chat_for(params)
        upload = params.get("document")
        if isinstance(upload, UploadedFile):
            file_id = self.store_file(upload.content, "documents", "")
            filename, content, mime = upload.filename, upload.content, upload.mime_type
        elif isinstance(upload, str) and upload:
            # A file_id or URL: re-sending something already on the server.
            file_id, filename, mime = upload, None, None
            content = self.files.get(upload, ("", b""))[1]
        else:
            raise bad_request("there is no document in the request")
        caption = params.get("caption")
        if caption is not None:
            check_text(caption, limit=1024)
        check_markup(params.get("reply_markup"))
        document: JSON = {"file_id": file_id, "file_unique_id": f"u{file_id}"}
        document.update({"file_name": filename, "mime_type": mime, "file_size": len(content)})
        message = self._new_bot_message(chat, params, document=document, caption=caption)
        self._record_sent("sendDocument", message, params)
        self.documents.append(
            {
                "chat_id": chat["id"],
                "message_id": message["message_id"],
                "filename": filename,
                "content": content,
                "mime_type": mime,
                "caption": caption,
            }
        )
        return message

    def send_chat_action(self, params: JSON) -> bool:
        chat = self._chat_for(params)
        if params.get("action") not in CHAT_ACTIONS:
            raise bad_request("wrong parameter action in request")
        self.chat_actions.append({"chat_id": chat["id"], "action": params["action"]})
        return True

    def _new_bot_message(self, chat: JSON, params: JSON, **content: Any) -> JSON:
        reply_to = self._reply_target(chat["id"], params)
        markup = inline_markup(params.get("reply_markup"))
        message = make_message(
            self.next_message_id(),
            chat,
            dict(self.bot_user),
            reply_to_message=reply_to,
            reply_markup=markup,
            **content,
        )
        self.messages[(chat["id"], message["message_id"])] = message
        return message

    def _reply_target(self, chat_id: int, params: JSON) -> JSON | None:
        reply = params.get("reply_parameters")
        if reply is None and params.get("reply_to_message_id") is not None:
            reply = {"message_id": params["reply_to_message_id"]}
        if not reply:
            return None
        target = self.messages.get((chat_id, int(reply["message_id"])))
        if target is None:
            if reply.get("allow_sending_without_reply") or params.get(
                "allow_sending_without_reply"
            ):
                return None
            raise bad_request("message to be replied not found")
        # The real API never nests replies more than one level deep.
        return {key: value for key, value in target.items() if key != "reply_to_message"}

    def _record_sent(self, method: str, message: JSON, params: JSON) -> None:
        reply_to = message.get("reply_to_message") or {}
        self._sent.append(
            {
                "method": method,
                "chat_id": message["chat"]["id"],
                "message_id": message["message_id"],
                "text": message.get("text"),
                "caption": message.get("caption"),
                "parse_mode": params.get("parse_mode"),
                "reply_to_message_id": reply_to.get("message_id"),
                "reply_parameters": params.get("reply_parameters"),
                "reply_markup": params.get("reply_markup"),
                "params": params,
                "message": message,
            }
        )

    def _chat_for(self, params: JSON) -> JSON:
        chat_id = params.get("chat_id")
        if isinstance(chat_id, str) and chat_id.startswith("@"):
            found = [c for c in self.chats.values() if f"@{c.get('username')}" == chat_id]
            if found:
                return found[0]
        elif chat_id is not None and int(chat_id) in self.chats:
            return self.chats[int(chat_id)]
        # Strict on purpose: a bot can only reach chats that have talked to it first.
        raise bad_request("chat not found")

    # -- chat members --------------------------------------------------------------------------

    def get_chat_administrators(self, params: JSON) -> list[JSON]:
        chat = self._chat_for(params)
        if chat["type"] == "private":
            raise bad_request("there are no administrators in the private chat")
        admins = self.chat_admins.get(chat["id"], {})
        return [self._member(user_id, status) for user_id, status in admins.items()]

    def get_chat_member(self, params: JSON) -> JSON:
        chat = self._chat_for(params)
        user_id = int(params["user_id"])
        return self._member(user_id, self.chat_admins.get(chat["id"], {}).get(user_id, "member"))

    def _member(self, user_id: int, status: str) -> JSON:
        """A ChatMember of the Bot API: its status and the fields that status requires."""
        user = make_user(user_id, f"User{user_id}")
        member: JSON = {"status": status, "user": user}
        if status == "creator":
            member["is_anonymous"] = False
        if status == "administrator":
            rights = ("can_manage_chat", "can_delete_messages", "can_manage_video_chats",
                      "can_restrict_members", "can_change_info", "can_invite_users",
                      "can_post_stories", "can_edit_stories", "can_delete_stories")  # fmt: skip
            member.update(dict.fromkeys(rights, True), can_be_edited=False, is_anonymous=False)
            member["can_promote_members"] = False
        return member

    # -- commands ------------------------------------------------------------------------------

    def set_my_commands(self, params: JSON) -> bool:
        commands = params.get("commands")
        if not isinstance(commands, list):
            raise bad_request("commands must be an array")
        for command in commands:
            if not _COMMAND_NAME.match(str(command.get("command", ""))):
                raise bad_request("BOT_COMMAND_INVALID")
            if not 1 <= len(str(command.get("description", ""))) <= 256:
                raise bad_request("command description must be 1-256 characters")
        self.commands[self._commands_key(params)] = commands
        return True

    def get_my_commands(self, params: JSON) -> list[JSON]:
        return list(self.commands.get(self._commands_key(params), []))

    def delete_my_commands(self, params: JSON) -> bool:
        self.commands.pop(self._commands_key(params), None)
        return True

    @staticmethod
    def _commands_key(params: JSON) -> tuple[str, str]:
        return scope_key(params.get("scope")), str(params.get("language_code") or "")

    # -- callbacks, edits, deletes, files ------------------------------------------------------

    def answer_callback_query(self, params: JSON) -> bool:
        query_id = str(params.get("callback_query_id"))
        if query_id not in self._open_callbacks:
            raise bad_request(
                "query is too old and response timeout expired or query ID is invalid"
            )
        self._open_callbacks.discard(query_id)
        fields = ("callback_query_id", "text", "show_alert", "url", "cache_time")
        self.answered_callbacks.append({name: params.get(name) for name in fields})
        return True

    def edit_message_text(self, params: JSON) -> JSON | bool:
        text, _ = formatted(params)
        check_markup(params.get("reply_markup"))
        return self._edit(params, "editMessageText", {"text": text})

    def edit_message_reply_markup(self, params: JSON) -> JSON | bool:
        check_markup(params.get("reply_markup"))
        return self._edit(params, "editMessageReplyMarkup", {})

    def _edit(self, params: JSON, method: str, changes: JSON) -> JSON | bool:
        # Omitting reply_markup in an edit removes the inline keyboard, as in the real API.
        changes["reply_markup"] = inline_markup(params.get("reply_markup"))
        target = None if params.get("inline_message_id") else self._edit_target(params)
        if target is not None:
            if all(target.get(key) == value for key, value in changes.items()):
                raise bad_request(
                    "message is not modified: specified new message content and reply markup "
                    "are exactly the same as a current content and reply markup of the message"
                )
            target.update(changes)
            target["edit_date"] = int(time.time())
            if target["reply_markup"] is None:
                del target["reply_markup"]
        self.edited_messages.append(
            {
                "method": method,
                "chat_id": params.get("chat_id"),
                "message_id": params.get("message_id"),
                "inline_message_id": params.get("inline_message_id"),
                "text": changes.get("text"),
                "parse_mode": params.get("parse_mode"),
                "reply_markup": params.get("reply_markup"),
            }
        )
        return True if target is None else dict(target)

    def _edit_target(self, params: JSON) -> JSON:
        target = self.messages.get((self._chat_for(params)["id"], int(params["message_id"])))
        if target is None:
            raise bad_request("message to edit not found")
        if target.get("from", {}).get("id") != self.bot_user["id"]:
            raise bad_request("message can't be edited")
        return target

    def delete_message(self, params: JSON) -> bool:
        key = (self._chat_for(params)["id"], int(params.get("message_id", 0)))
        if self.messages.pop(key, None) is None:
            raise bad_request("message to delete not found")
        self.deleted_messages.append(key)
        return True

    def get_file(self, params: JSON) -> JSON:
        file_id = str(params.get("file_id"))
        if file_id not in self.files:
            raise bad_request("invalid file_id")
        path, content = self.files[file_id]
        found: JSON = {"file_id": file_id, "file_unique_id": f"u{file_id}", "file_path": path}
        if file_id not in self.undeclared_sizes:
            found["file_size"] = len(content)
        return found
