"""Admin subcommands: `characters import`, `characters export` and `stats`.

bot/cli.py wires them: `register(commands, characters_commands)` in `build_parser`, and
`await run_admin(args, settings)` before its own dispatch (None means "not mine").
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from bot.budgets import format_spend, spend_rows
from bot.cli_characters import book_of_valid_files, default_line
from bot.config import Settings
from bot.texts import LANGUAGES
from cards.character import Character, CharacterFileError, load_character
from cards.export import avatar_path, card_png
from cards.lint import lint_character
from cards.lore_files import LoreFileError
from cards.sillytavern import CardError, card_from_character, import_card, save_imported
from memory.budget.policy import Pricing
from memory.engine.tokens import TokenEstimator
from memory.models import UsageRecord
from memory.store import MemoryStore, open_store
from memory.usage_stats import (
    Prices,
    PriceTable,
    format_table,
    parse_model_prices,
    summarize,
    totals,
)

_SINCE = re.compile(r"^(\d+)\s*([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


class AdminError(Exception):
    """A failure the admin can fix; printed as one line, exit status 2."""


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    characters: argparse._SubParsersAction[argparse.ArgumentParser] | None = None,
) -> None:
    """Add the subcommands; `characters` is the `characters` parser's own subparsers (made
    here when the main parser has no `characters` command yet, as in tests)."""
    if characters is None:
        parent = commands.add_parser("characters", help="manage character files")
        characters = parent.add_subparsers(dest="action", required=True)
    imp = characters.add_parser(
        "import", help="make a character file from a SillyTavern card (V2/V3, JSON or PNG)"
    )
    imp.add_argument("file", type=Path, help="the card: .json, or a .png that embeds it")
    imp.add_argument("--out", type=Path, help="folder to write to (default: CHARACTERS_DIR)")
    imp.add_argument("--force", action="store_true", help="overwrite an existing file")
    exp = characters.add_parser(
        "export", help="write a character as a V2 card (JSON, or PNG with its avatar)"
    )
    exp.add_argument("id", help="character id (see characters list)")
    exp.add_argument(
        "--out",
        type=Path,
        help="file to write; a name ending in .png embeds the card in the character's avatar "
        "(default: JSON on standard output)",
    )
    exp.add_argument("--force", action="store_true", help="overwrite an existing file")
    stats = commands.add_parser(
        "stats",
        help="LLM calls, tokens, cache share, latency and cost per character and kind, and the "
        "conversations given up while the provider failed",
    )
    stats.add_argument("--since", help="only calls newer than this: 30m, 24h, 7d, 2w or a date")
    stats.add_argument("--price-input", type=float, help="USD per million input tokens")
    stats.add_argument("--price-output", type=float, help="USD per million output tokens")
    stats.add_argument(
        "--by",
        choices=("person", "community"),
        help="today's and this month's spend of each person or community against its budget "
        "(BUDGET_*)",
    )


async def run_admin(args: argparse.Namespace, settings: Settings) -> int | None:
    command = getattr(args, "command", None)
    action = getattr(args, "action", None)
    try:
        if command == "characters" and action == "import":
            return _import(args, settings)
        if command == "characters" and action == "export":
            return _export(args, settings)
        if command == "stats":
            return await _stats(args, settings)
    except (AdminError, CardError, CharacterFileError, LoreFileError) as exc:
        print(f"companion: {exc}", file=sys.stderr)
        return 2
    return None


# ---- characters import / export --------------------------------------------------------------


def _import(args: argparse.Namespace, settings: Settings) -> int:
    imported = import_card(args.file)
    folder: Path = args.out or settings.characters_dir
    character = imported.character
    _refuse_duplicate_id(folder, character.id)
    try:
        path, pages = save_imported(imported, folder, overwrite=args.force)
    except FileExistsError as exc:
        raise AdminError(f"{exc}; pass --force to overwrite it") from exc
    load_character(path)  # the file must load as the bot will load it
    where = f" and {len(pages)} lore page(s) in {pages[0].parent}/" if pages else ""
    print(f"imported {args.file} -> {path}{where}")
    review = [
        *imported.notes,
        *(
            f"lint: {w.field}: {w.message}"
            for w in lint_character(character, languages=LANGUAGES)
        ),
    ]
    if review:
        print(f"needs a human ({len(review)}):")
        for line in review:
            print(f"  - {line}")
    if folder.resolve() == settings.characters_dir.resolve():
        print(default_line(settings))  # an import never changes who new users get, silently
    return 0


def _refuse_duplicate_id(folder: Path, character_id: str) -> None:
    """A second file with the same id would stop the bot at start-up; catch it now."""
    target = folder / f"{character_id}.yaml"
    for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
        if path == target:
            continue
        try:
            other = load_character(path)
        except CharacterFileError:
            continue  # `characters lint` reports broken files; they do not block an import
        if other.id == character_id:
            raise AdminError(
                f"{path} already uses the id '{character_id}'; rename one of them first"
            )


def _find_character(folder: Path, character_id: str) -> Character:
    direct = folder / f"{character_id}.yaml"
    if direct.is_file():
        return load_character(direct)
    book = book_of_valid_files(folder)
    found = book.get(character_id)
    if found is None:
        raise AdminError(
            f"no character '{character_id}' in {folder}; known ids: {', '.join(book.ids())}"
        )
    return found


def _export(args: argparse.Namespace, settings: Settings) -> int:
    character = _find_character(settings.characters_dir, args.id)
    card = card_from_character(character)
    text = json.dumps(card, ensure_ascii=False, indent=2) + "\n"
    if args.out is None:
        sys.stdout.write(text)
        return 0
    if args.out.exists() and not args.force:
        raise AdminError(f"{args.out} already exists; pass --force to overwrite it")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    kind = "V2 card"
    if args.out.suffix.lower() == ".png":
        avatar = avatar_path(Path(character.source_path))
        image = avatar.read_bytes() if avatar.is_file() else None
        args.out.write_bytes(card_png(card, image))
        kind = "V2 card in its avatar PNG" if image else "V2 card in a blank PNG (no avatar)"
    else:
        args.out.write_text(text, encoding="utf-8")
    entries = len(card["data"].get("character_book", {}).get("entries", []))
    print(f"exported {character.id} -> {args.out} ({kind}, {entries} lore entries)")
    return 0


# ---- stats -----------------------------------------------------------------------------------


def parse_since(text: str, now: datetime) -> datetime:
    """'7d' -> now minus 7 days; an ISO date or datetime is taken as UTC when it has no zone."""
    match = _SINCE.match(text.strip().lower())
    if match:
        return now - timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise AdminError(
            f"--since {text!r}: expected 30m, 24h, 7d, 2w, or a date such as 2026-11-01"
        ) from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


async def load_usage(store: MemoryStore, since: datetime | None) -> list[UsageRecord]:
    """The usage rows, newer than `since` when given."""
    return await store.usage_records(since=since)


def _prices(args: argparse.Namespace, settings: Settings) -> PriceTable:
    # The price table comes from the settings (PRICE_INPUT_PER_MTOK, PRICE_OUTPUT_PER_MTOK);
    # flags win.
    default_in = settings.price_input_per_mtok
    default_out = settings.price_output_per_mtok
    paid = Prices(
        input_per_mtok=args.price_input if args.price_input is not None else default_in,
        output_per_mtok=args.price_output if args.price_output is not None else default_out,
    )
    return PriceTable(paid, parse_model_prices(settings.model_prices))


def _other_models(records: list[UsageRecord], prices: PriceTable) -> str:
    """How the models that are not Anthropic's were priced: at MODEL_PRICES, or at 0."""
    models = sorted({r.model for r in records if prices.of(r.model) is not prices.paid})
    if not models:
        return "other models (not claude-...): none used"
    shown = []
    for model in models:
        p = prices.of(model)
        shown.append(f"{model} ${p.input_per_mtok:g}/${p.output_per_mtok:g}")
    return f"other models, input/output per million tokens (MODEL_PRICES): {', '.join(shown)}"


async def _stats(args: argparse.Namespace, settings: Settings) -> int:
    since = parse_since(args.since, datetime.now(UTC)) if args.since else None
    prices = _prices(args, settings)
    if settings.database_url is None and not settings.database_path.exists():
        print(f"no usage recorded yet: {settings.database_path} does not exist")
        return 0
    store = await open_store(settings.database_target, migrate=False)
    if args.by:
        return await _spend_by(args.by, settings, store)
    try:
        records = await load_usage(store, since)
        given_up = await store.given_up_jobs()
    finally:
        await store.close()
    window = f" since {since.isoformat(timespec='minutes')}" if since else ""
    paid = prices.paid
    print(
        f"LLM usage{window}: {len(records)} call(s); Anthropic's prices per million tokens: "
        f"input ${paid.input_per_mtok:g}, output ${paid.output_per_mtok:g}, cache read "
        f"{paid.cache_read_factor:g}x and cache write {paid.cache_write_factor:g}x input"
    )
    print(_other_models(records, prices))
    if records:
        print(format_table(summarize(records, prices), totals(records, prices)))
    if any(given_up.values()):
        # Never asked again once given up (memory/engine/retries.py): the admin must know.
        counts = ", ".join(f"{job} {count}" for job, count in given_up.items() if count)
        print(
            f"conversations given up after their provider failed every retry: {counts} "
            "(companion.log says why)"
        )
    return 0


async def _spend_by(kind: str, settings: Settings, store: MemoryStore) -> int:
    """`stats --by person|community`: spend against budgets, from the budgets' counters."""
    try:
        rows = await spend_rows(settings, store, datetime.now(ZoneInfo(settings.timezone)))
    finally:
        await store.close()
    unit = Pricing.for_model(settings.price_table(), settings.llm_model, TokenEstimator()).unit
    state = "on" if settings.budget_policy().active else "off (unlimited)"
    print(f"budgets {state}; spend by {kind} today and this month, in {unit}:")
    print(format_spend(rows, kind, unit))
    return 0
