"""All settings, read once from the environment and `.env`, then injected."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from bot.access import parse_rules
from memory.budget.policy import BudgetPolicy, parse_people
from memory.engine.prompt import Budgets, min_cacheable_tokens
from memory.engine.settings import EngineSettings
from memory.models import FACT_KINDS
from memory.profile.view import Lifetimes
from memory.store import POSTGRES_SCHEMES, public_name
from memory.store.access import AccessState
from memory.usage_stats import Prices, PriceTable, parse_model_prices

# Keys that compose.yaml reads from .env for its own services (the PostgreSQL container's
# password): known, so the host commands do not call them misspelt, and no setting of the bot.
COMPOSE_KEYS = ("POSTGRES_PASSWORD",)


class _EnvBeforeDotEnv(PydanticBaseSettingsSource):
    """The `.env` values, less those the environment names, even empty: `LOG_LEVEL= companion
    ...` means the default, whatever `.env` says (pydantic-settings alone lets `.env` win over
    an empty variable, since empty ones are ignored)."""

    def __init__(self, settings_cls: type[BaseSettings], dotenv: PydanticBaseSettingsSource):
        super().__init__(settings_cls)
        self._dotenv = dotenv

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads the whole file at once

    def __call__(self) -> dict[str, Any]:
        named = {key.upper() for key in os.environ}
        return {k: v for k, v in self._dotenv().items() if setting_name(k) not in named}


class Settings(BaseSettings):
    # Empty values in .env mean "use the default", as in .env.example.
    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", env_ignore_empty=True
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        dotenv = _EnvBeforeDotEnv(settings_cls, dotenv_settings)
        return init_settings, env_settings, dotenv, file_secret_settings

    # LLM provider
    llm_provider: Literal["anthropic", "openai"] = "anthropic"
    llm_model: str = "claude-sonnet-5-5"
    llm_summary_model: str | None = None
    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None
    openai_api_key: SecretStr | None = None
    openai_base_url: str | None = None
    llm_timeout_seconds: float = Field(60.0, gt=0)
    llm_max_retries: int = Field(2, ge=0, le=10)
    llm_max_reply_tokens: int = Field(600, ge=16)
    # Background calls on the reply's model send the reply's tools and system first, to read
    # its cache (memory/engine/prefix.py). Off: measured to cost more than it saves.
    llm_share_reply_prefix: bool = False

    # Storage and characters
    database_path: Path = Path("./data/companion.db")
    # A PostgreSQL server instead of the SQLite file (postgresql://user:password@host/db).
    # Secret: it may hold a password, so it is never logged (memory/integrity/redaction.py).
    database_url: SecretStr | None = None
    characters_dir: Path = Path("./characters")

    # Prompt budgets (tokens) and the window
    budget_profile_tokens: int = Field(500, ge=50)
    summary_cap_tokens: int = Field(450, ge=100)
    # "El Viaje": the chronicle of each private thread, in block 2 (memory/journey/).
    journey_max_tokens: int = Field(700, ge=150, le=4000)
    llm_journey_model: str | None = None  # the summary model when unset
    # The story of each scene: every character's chronicle of a group scene, in its block 2
    # there (memory/scene/chronicle.py); 0 keeps none.
    scene_journey_max_tokens: int = Field(400, ge=0, le=4000)
    # Canon proposals after each conversation (memory/canon/): one background call per ended
    # conversation of a character that allows them (`canon: false` opts a character out).
    canon_proposals: bool = True
    budget_window_tokens: int = Field(3000, ge=200)
    budget_fragments_tokens: int = Field(600, ge=0)
    lore_page_cap_tokens: int = Field(1500, ge=100)
    window_keep_turns: int = Field(12, ge=0)
    window_trigger_turns: int = Field(32, ge=2)
    inactivity_timeout_minutes: float = Field(30.0, gt=0)
    max_sessions_in_ram: int = Field(2000, ge=1)
    # Scenes (groups): character lines per people's message at most, and the seed of the
    # choice of who answers a message that names nobody (empty: a new choice every run).
    scene_max_replies: int = Field(2, ge=1, le=5)
    scene_seed: int | None = None

    # Long-term profile: lifetime in days per key, or per kind (semantic, emotional, episodic);
    # "never" keeps a fact true until the user changes it. Past it, a fact is shown as a
    # hypothesis to confirm.
    fact_lifetimes: str = (
        "semantic:180,emotional:60,episodic:120,name:never,preferred_name:never,"
        "pronouns:never,birthday:never,language:never,age:365,job:180,city:180,home:180,"
        "partner:365"
    )
    event_ask_days: int = Field(14, ge=0)

    # People
    admin_ids: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Who may talk (bot/access.py, docs/deploy.md "Before opening to the public"): rules as
    # PLATFORM:KIND:ID, KIND one of user, group, server, channel, role (telegram:user:123,
    # discord:role:456). Added to the database's rules at every start (with DMs off and
    # invite-only on when set so); changed live with /admin acceso or `companion access`.
    access_allowed: Annotated[list[str], NoDecode] = Field(default_factory=list)
    access_blocked: Annotated[list[str], NoDecode] = Field(default_factory=list)
    access_dms: bool = True
    access_invite_only: bool = False
    # How often each process looks whether the rules changed (another worker, the CLI).
    access_refresh_seconds: float = Field(2.0, gt=0, le=60)
    # Communities (bot/community.py): the characters each group or server may use, as JSON
    # {"telegram:<chat id>": [ids], "discord:<guild id>": [ids]}; one not listed may use all.
    community_characters: Annotated[dict[str, list[str]], NoDecode] = Field(default_factory=dict)
    # How long a Telegram group's admin list is trusted before asking Telegram again.
    community_admins_cache_seconds: float = Field(300.0, ge=0)
    # Mature characters (rating: mature) may speak in private chats.
    mature_dms: bool = False

    # Platforms (used by the adapters)
    telegram_bot_token: SecretStr | None = None
    telegram_api_base_url: str = "https://api.telegram.org"
    telegram_webhook_url: str | None = None
    telegram_webhook_listen: str = "0.0.0.0"
    telegram_webhook_port: int = Field(8443, ge=1, le=65535)
    telegram_webhook_secret: SecretStr | None = None
    discord_bot_token: SecretStr | None = None
    discord_api_base_url: str = "https://discord.com/api/v10"
    # The gateway shard a Discord platform process connects (`--role platform`): shard
    # DISCORD_SHARD_ID of DISCORD_SHARD_COUNT, one process each; unset, one connection serves
    # every guild (Discord requires sharding from 2,500 guilds).
    discord_shard_id: int | None = Field(None, ge=0)
    discord_shard_count: int | None = Field(None, ge=1)

    # Chat limits
    default_character: str | None = None
    max_message_chars: int = Field(4000, ge=1)
    rate_limit_messages: int = Field(8, ge=1)
    rate_limit_window_seconds: float = Field(60.0, gt=0)
    shutdown_grace_seconds: float = Field(20.0, ge=0)
    # Replies fill in as the model writes them (Telegram and Discord edit one message), with at
    # least this many seconds between edits: both platforms limit edits per chat.
    stream_replies: bool = True
    stream_edit_seconds: float = Field(1.5, ge=0)

    # Several workers on PostgreSQL (`companion run --role platform|worker`, docs/deploy.md): the
    # health endpoint (/healthz, /metrics) of each process, off unless a port is set (0: any).
    health_port: int | None = Field(None, ge=0, le=65535)
    health_host: str = "127.0.0.1"
    # A worker answers this many users at once; a user's claim lasts this long past the
    # worker's last sign of life (then another worker answers); an idle worker looks for
    # expired claims this often; answered messages are kept this long (redeliveries).
    worker_concurrency: int = Field(64, ge=1)
    inbox_lease_seconds: float = Field(30.0, gt=0)
    inbox_poll_seconds: float = Field(1.0, gt=0)
    inbox_keep_hours: float = Field(48.0, gt=0)
    # A user's next message waits this long for the worker that answered them last (it holds
    # their session in RAM) before any other worker takes it.
    inbox_affinity_ms: float = Field(50.0, ge=0)

    # Price table for `companion stats` (USD per million tokens); cache reads bill at 0.1x and
    # cache writes at 1.25x of the input price.
    price_input_per_mtok: float = Field(3.0, ge=0)
    price_output_per_mtok: float = Field(15.0, ge=0)
    # Other models' prices, model:INPUT:OUTPUT by prefix (llama3:0:0,claude-haiku:1:5); a
    # model that is not Anthropic's (claude-...) and not named here costs 0.
    model_prices: str = ""

    # Budgets (off when unset: unlimited), in USD at the prices above, or in tokens when
    # LLM_MODEL is priced at 0; every call counts, background ones included (docs/deploy.md).
    budget_person_day: float | None = Field(None, ge=0)
    budget_person_month: float | None = Field(None, ge=0)
    budget_guest_day: float | None = Field(None, ge=0)
    budget_guest_month: float | None = Field(None, ge=0)
    budget_community_day: float | None = Field(None, ge=0)
    budget_global_day: float | None = Field(None, ge=0)
    budget_people: str = ""
    # The global cap kept in this many counters, so that concurrent calls do not all wait on
    # one row (docs/budgets.md: measured, it did not pay on the bench's machine; off).
    budget_global_stripes: int = Field(1, ge=1, le=64)

    # Photos: shown to the model when it can see images (Anthropic; the OpenAI-compatible
    # provider never), described by LLM_SUMMARY_MODEL, refused past PHOTO_MAX_BYTES.
    llm_vision: bool = True
    photo_max_bytes: int = Field(5_000_000, ge=1)

    # Follow-ups (opt-in per user with /avisos): at most this many a week per user and
    # character, never between the quiet hours (the user's local time), and at most this many
    # days after the event; the scheduler looks for due ones every FOLLOWUP_CHECK_SECONDS.
    followups_per_week: int = Field(2, ge=0)
    followup_quiet_start_hour: int = Field(21, ge=0, le=23)
    followup_quiet_end_hour: int = Field(10, ge=0, le=23)
    followup_window_days: int = Field(3, ge=0)
    followup_check_seconds: float = Field(300.0, gt=0)

    # A dead letter that names no sender is reached by no forget: the sweep deletes it once it
    # is this many days old (bot/jobs.py). One with a sender stays until purged or forgotten.
    dead_letter_no_sender_days: float = Field(7.0, gt=0)

    timezone: str = "UTC"
    log_level: str = "INFO"
    # The model SDKs' own DEBUG logging writes every request in full (profile, summary,
    # window): off unless asked for; never for an off-record call, never the platforms'.
    log_sdk_payloads: bool = False

    def secrets(self) -> list[str]:
        """Every secret value, so that logs and stored error bodies can redact them: read from
        every SecretStr field, so that a secret added later cannot be left out."""
        values = (getattr(self, name) for name in type(self).model_fields)
        found = [v.get_secret_value() for v in values if isinstance(v, SecretStr)]
        if self.database_url is not None:  # a driver's message may quote the password alone
            password = urlsplit(self.database_url.get_secret_value()).password
            found += [password] if password else []
        return found

    @field_validator("database_url")
    @classmethod
    def _known_database_scheme(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith(POSTGRES_SCHEMES):
            raise ValueError(
                "must start with postgresql:// (or postgres://); leave it unset for the "
                "SQLite file at DATABASE_PATH"
            )
        return value

    @property
    def database_target(self) -> str | Path:
        """Where the store lives: the PostgreSQL URL when set, else the SQLite file."""
        if self.database_url is not None:
            return self.database_url.get_secret_value()
        return self.database_path

    @property
    def database_name(self) -> str:
        """The database as logs and messages may name it: never the URL's password."""
        return public_name(self.database_target)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(
                f"unknown time zone '{value}'; use an IANA name such as Europe/Madrid or UTC"
            ) from exc
        return value

    @field_validator("access_allowed", "access_blocked")
    @classmethod
    def _rules_parse(cls, value: list[str]) -> list[str]:
        parse_rules(value, "allow")
        return value

    def access_start(self) -> AccessState:
        """The starting rules of `.env` (bot/access.py)."""
        rules = [*parse_rules(self.access_allowed, "allow")]
        rules += parse_rules(self.access_blocked, "block")
        return AccessState(frozenset(rules), self.access_dms, self.access_invite_only)

    @field_validator("admin_ids", "access_allowed", "access_blocked", mode="before")
    @classmethod
    def _split_ids(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("community_characters", mode="before")
    @classmethod
    def _community_json(cls, value: object) -> object:
        try:
            return json.loads(value.strip() or "{}") if isinstance(value, str) else value
        except json.JSONDecodeError as exc:
            raise ValueError(f'not JSON like {{"telegram:<chat id>": ["<id>"]}}: {exc}') from exc

    @field_validator("model_prices")
    @classmethod
    def _model_prices_parse(cls, value: str) -> str:
        parse_model_prices(value)
        return value

    @field_validator("budget_people")
    @classmethod
    def _budget_people_parse(cls, value: str) -> str:
        parse_people(value)
        return value

    def budget_policy(self) -> BudgetPolicy:
        return BudgetPolicy(
            self.budget_person_day, self.budget_person_month, self.budget_guest_day,
            self.budget_guest_month, self.budget_community_day, self.budget_global_day,
            parse_people(self.budget_people), global_stripes=self.budget_global_stripes,
        )  # fmt: skip

    def price_table(self) -> PriceTable:
        paid = Prices(self.price_input_per_mtok, self.price_output_per_mtok)
        return PriceTable(paid, parse_model_prices(self.model_prices))

    @field_validator("fact_lifetimes")
    @classmethod
    def _lifetimes_parse(cls, value: str) -> str:
        parse_lifetimes(value, 0)
        return value

    def lifetimes(self) -> Lifetimes:
        return parse_lifetimes(self.fact_lifetimes, self.event_ask_days)

    def check_window(self) -> None:
        if self.window_keep_turns >= self.window_trigger_turns:
            raise ValueError(
                f"WINDOW_KEEP_TURNS ({self.window_keep_turns}) must be below "
                f"WINDOW_TRIGGER_TURNS ({self.window_trigger_turns})"
            )

    def model_warnings(self) -> list[str]:
        """Model names that do not fit the provider: sent as they are, they fail every call."""
        found = []
        for name, model in (
            ("LLM_MODEL", self.llm_model),
            ("LLM_SUMMARY_MODEL", self.llm_summary_model),
        ):
            if not model:
                continue
            is_claude = model.lower().startswith("claude")
            if self.llm_provider == "openai" and is_claude:
                found.append(
                    f"{name}={model} is an Anthropic model but LLM_PROVIDER=openai; set {name} "
                    "to a model your OpenAI-compatible server serves"
                )
            elif self.llm_provider == "anthropic" and not is_claude:
                found.append(
                    f"{name}={model} is not an Anthropic model (claude-...) but "
                    "LLM_PROVIDER=anthropic; set LLM_PROVIDER=openai for other servers"
                )
        return found

    def engine(self) -> EngineSettings:
        self.check_window()
        return EngineSettings(
            budgets=Budgets(
                profile=self.budget_profile_tokens,
                summary=self.summary_cap_tokens,
                window=self.budget_window_tokens,
                fragments=self.budget_fragments_tokens,
                cache_min_tokens=min_cacheable_tokens(self.llm_model),
            ),
            window_keep_turns=self.window_keep_turns,
            window_trigger_turns=self.window_trigger_turns,
            inactivity_timeout=timedelta(minutes=self.inactivity_timeout_minutes),
            max_reply_tokens=self.llm_max_reply_tokens,
            max_sessions_in_ram=self.max_sessions_in_ram,
            lore_page_cap_tokens=self.lore_page_cap_tokens,
            scene_max_replies=self.scene_max_replies,
            scene_seed=self.scene_seed,
        )


def parse_lifetimes(text: str, event_ask_days: int) -> Lifetimes:
    """'semantic:180,name:never,...' -> Lifetimes; the error names the bad entry."""
    by_key: dict[str, int | None] = {}
    by_kind: dict[str, int | None] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        name, _, days = entry.partition(":")
        if days != "never" and not days.isdigit():
            raise ValueError(f"FACT_LIFETIMES entry '{entry}': expected key:DAYS or key:never")
        target = by_kind if name in FACT_KINDS else by_key
        target[name.strip()] = None if days == "never" else int(days)
    missing = [kind for kind in FACT_KINDS if kind not in by_kind]
    if missing:
        raise ValueError(f"FACT_LIFETIMES needs a lifetime for every kind; missing {missing}")
    return Lifetimes(by_key=by_key, by_kind=by_kind, event_ask_days=event_ask_days)


def setting_name(field: str) -> str:
    """The name as written in .env and the environment."""
    return field.upper()
