"""`companion access`: the operator's rules of who may talk (bot/access.py), listed and
changed in the database; every running process follows within ACCESS_REFRESH_SECONDS."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from bot.access import Access, RuleError, parse_rule, rule_text
from bot.config import Settings
from memory.errors import UserFacingError
from memory.store import open_store
from memory.store.access import Effect

# action -> (effect, present)
RULE_ACTIONS: dict[str, tuple[Effect, bool]] = {
    "allow": ("allow", True),
    "block": ("block", True),
    "unallow": ("allow", False),
    "unblock": ("block", False),
}
FLAG_ACTIONS = {"dms": "dms", "invite-only": "invite_only"}
RULE_HELP = "PLATFORM:KIND:ID, KIND one of user, group, server, channel, role"


def register(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    access = commands.add_parser(
        "access", help="who may talk: list or change the allowed and blocked lists and switches"
    )
    actions = access.add_subparsers(dest="access_action", required=True, metavar="ACTION")
    actions.add_parser("list", help="the rules and switches in the database")
    for name, (effect, present) in RULE_ACTIONS.items():
        verb = "onto" if present else "off"
        action = actions.add_parser(name, help=f"put ids {verb} the {effect}ed list")
        action.add_argument("rules", nargs="+", metavar="RULE", help=RULE_HELP)
    for name, flag in FLAG_ACTIONS.items():
        action = actions.add_parser(name, help=f"turn {flag.replace('_', '-')} on or off")
        action.add_argument("state", choices=("on", "off"))


def _env_keeps(settings: Settings, rule_spec: str, effect: Effect) -> bool:
    listed = settings.access_allowed if effect == "allow" else settings.access_blocked
    return rule_spec in {rule_text(parse_rule(spec, effect)) for spec in listed}


async def run_access(args: argparse.Namespace, settings: Settings) -> int:
    store = await open_store(settings.database_target)
    try:
        access = Access(store, settings.admin_ids, lambda: datetime.now(UTC))
        action = args.access_action
        if action in RULE_ACTIONS:
            effect, present = RULE_ACTIONS[action]
            try:  # all valid, or none changed
                rules = [parse_rule(spec, effect) for spec in args.rules]
            except RuleError as error:
                raise UserFacingError(str(error)) from error
            for rule in rules:
                changed = await access.set_rule(rule, present, "cli")
                print(f"{action} {rule_text(rule)}: {'done' if changed else 'already so'}")
                if not present and _env_keeps(settings, rule_text(rule), effect):
                    key = f"ACCESS_{effect.upper()}ED"
                    print(f"  note: {key} in .env lists it: it comes back at the next start")
        elif action in FLAG_ACTIONS:
            await access.set_flag(FLAG_ACTIONS[action], args.state == "on")
        for line in await access.listing():
            print(line)
    finally:
        await store.close()
    return 0
