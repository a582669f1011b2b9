"""The interaction routes of the fake Discord REST API: the callback that acknowledges an
interaction, and the webhook (the interaction's token) that follow-ups and edits of the
original response go through."""

from __future__ import annotations

import asyncio

from aiohttp import web

from tests.fakes.discord_http import apply_edit, error, json_response, read_body
from tests.fakes.discord_records import Followup, InteractionCallback, UploadedFile
from tests.fakes.discord_world import EPHEMERAL, JSON, LOADING, FakeWorld, InteractionState


class InteractionRoutes:
    """Part of FakeRest (its world, its recordings, its way of making the bot's messages)."""

    world: FakeWorld
    interaction_responses: list[InteractionCallback]
    followups: list[Followup]
    # Seconds an interaction's acknowledgement takes to land (a slow network, a busy Discord).
    callback_delay: float = 0.0

    def _bot_message(
        self, channel_id: int, payload: JSON, files: list[UploadedFile], **extra: object
    ) -> JSON:
        raise NotImplementedError

    def _interaction(self, request: web.Request) -> InteractionState | None:
        return self.world.interactions.get(request.match_info["token"])

    async def _callback(self, request: web.Request) -> web.Response:
        await asyncio.sleep(self.callback_delay)
        state = self._interaction(request)
        if state is None or str(state.id) != request.match_info["interaction_id"]:
            return error(404, "Unknown interaction", 10062)
        if state.callback_types:
            return error(400, "Interaction has already been acknowledged.", 40060)
        payload, files = await read_body(request)
        kind, data = int(payload["type"]), payload.get("data") or {}
        state.callback_types.append(kind)
        self.interaction_responses.append(InteractionCallback(state.id, kind, data, files))
        if kind in (4, 5):
            flags = int(data.get("flags") or 0) | (LOADING if kind == 5 else 0)
            state.original = self._bot_message(
                state.channel_id, {**data, "flags": flags}, files, **self._webhook_fields()
            )
        elif kind == 6 and state.message is not None:
            # A deferred update: the response to edit later is the message the button is on.
            state.original = self.world.messages.get(int(state.message["id"]), state.message)
        if request.query.get("with_response") not in ("1", "true", "True"):
            return web.Response(status=204)
        return json_response(self._callback_response(state, kind))

    def _callback_response(self, state: InteractionState, kind: int) -> JSON:
        original = state.original or {}
        flags = int(original.get("flags") or 0)
        response: JSON = {
            "interaction": {
                "id": str(state.id),
                "type": 2,
                "response_message_id": original.get("id"),
                "response_message_loading": bool(flags & LOADING),
                "response_message_ephemeral": bool(flags & EPHEMERAL),
            }
        }
        if state.original is not None:
            response["resource"] = {"type": kind, "message": state.original}
        return response

    def _webhook_fields(self) -> JSON:
        app_id = str(self.world.application_id)
        return {"webhook_id": app_id, "application_id": app_id}

    async def _followup(self, request: web.Request) -> web.Response:
        state = self._interaction(request)
        if state is None:
            return error(404, "Unknown Webhook", 10015)
        payload, files = await read_body(request)
        message = self._bot_message(state.channel_id, payload, files, **self._webhook_fields())
        self.followups.append(Followup(state.id, "POST", "followup", payload, message, files))
        if request.query.get("wait") not in ("1", "true", "True"):
            return web.Response(status=204)
        return json_response(message)

    def _hook_message(self, request: web.Request) -> tuple[InteractionState | None, JSON | None]:
        state = self._interaction(request)
        target = request.match_info["message_id"]
        if state is None:
            return None, None
        if target == "@original":
            return state, state.original
        return state, self.world.messages.get(int(target)) if target.isdigit() else None

    async def _get_hook_message(self, request: web.Request) -> web.Response:
        _, message = self._hook_message(request)
        return json_response(message) if message else error(404, "Unknown Message", 10008)

    async def _edit_hook_message(self, request: web.Request) -> web.Response:
        state, message = self._hook_message(request)
        if state is None or message is None:
            return error(404, "Unknown Message", 10008)
        payload, files = await read_body(request)
        apply_edit(message, payload)
        target = request.match_info["message_id"]
        self.followups.append(Followup(state.id, "PATCH", target, payload, message, files))
        return json_response(message)

    async def _delete_hook_message(self, request: web.Request) -> web.Response:
        state, message = self._hook_message(request)
        if state is None or message is None:
            return error(404, "Unknown Message", 10008)
        target = request.match_info["message_id"]
        self.followups.append(Followup(state.id, "DELETE", target, {}, None))
        return web.Response(status=204)
