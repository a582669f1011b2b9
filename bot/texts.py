"""The message catalogue: everything the bot itself says (not the characters), in Spanish and
English. Command names and their help live with the commands (bot/registry.py); every other
user-visible sentence is here, so a translation is one place and a test can hold the rest of the
code to it. `memory/` cannot import this module: its refusals carry a code (`UserFacingError.code`)
that is one of these keys, and bot/ words them.
"""

from __future__ import annotations

from datetime import datetime

from bot.texts_admin import ADMIN_TEXTS
from bot.texts_scenes import SCENE_TEXTS

LANGUAGES = ("es", "en")

_USER_TEXTS: dict[str, dict[str, str]] = {
    "es": {
        "help": "Hablas con {name}. Escríbeme y te contesto; recuerdo lo que me cuentas.\n"
        "{commands}",
        "start_hint": "({help}: qué puedo hacer y qué comandos hay)",
        "characters": "Personajes disponibles (ahora: {current}):",
        "switched": "Ahora hablas con {name}.",
        "unknown_character": "No conozco a «{given}». Disponibles: {valid}.",
        "bound": "Este canal queda vinculado a {name}: contestará a todos los mensajes.",
        "unbound": "Este canal ya no está vinculado a ningún personaje.",
        "admins_only": "Solo el operador del bot puede hacer eso (su id está en ADMIN_IDS).",
        "manage_telegram": "Solo los administradores de este grupo (o el operador del bot) "
        "pueden hacer eso.",
        "manage_discord": "Solo quien tiene el permiso Gestionar servidor (o Gestionar canales "
        "en este canal), o el operador del bot, puede hacer eso.",
        "character_not_here": "{name} no está disponible en esta comunidad: lo decide el "
        "operador del bot.",
        "whoami": "Tus ids: {ids}",
        "reset": "Conversación terminada. Lo importante queda guardado; la próxima empieza "
        "de cero.",
        "reset_none": "No había ninguna conversación abierta.",
        "rate_limited": "Vas muy rápido: te contesto a todo dentro de {seconds} s.",
        "too_long": "Tu mensaje tiene {length} caracteres y el límite es {limit} (te pasas en "
        "{over}). Pártelo en mensajes más cortos.",
        "attachment": "Por ahora solo leo texto: cuéntamelo con palabras.",
        "empty": "No veo texto en ese mensaje.",
        "error": "Algo ha fallado por mi parte. Inténtalo de nuevo en un momento.",
        "private_pointer": "Te he contestado por privado.",
        # Groups (a scene's own wording is in bot/texts_scenes.py)
        "incognito_group": "En un grupo no hay conversación fuera de registro: lo que se dice "
        "aquí lo oyen todos. Escríbeme por privado y usa /incognito allí.",
        "start_private": "Para verlo en privado, ábreme un chat privado y escribe /start.",
        "reload_refused": "Rechazado: sigo con la versión anterior de estos ficheros; el resto "
        "queda recargado.",
        "reloaded": "Personajes recargados ({count}): {ids}.",
        "usage": "Uso: {usage}",
        "unknown_command": "No conozco /{given}. Comandos: {valid}.",
        "terminal_header": "{name}. /ayuda: los comandos; /press DATOS pulsa un botón; /quit "
        "(o Ctrl-D) para salir.",
        "written_to": "(guardado en {path})",
        "cancel_too_late": "(demasiado tarde para cancelar: tu mensaje y esta respuesta se "
        "guardaron)",
        "cancel_kept": "(respuesta cancelada; tu mensaje se guardó y la próxima respuesta lo verá)",
        "cancel_not_kept": "(respuesta cancelada; tu mensaje no se guardó)",
        # /zona, /incognito
        "zone_set": "Tu zona horaria es ahora {zone} (allí son las {time}).",
        "zone_bad": "No conozco la zona horaria «{given}». Usa un nombre como Europe/Madrid o "
        "America/Mexico_City.",
        "incognito_on": "Conversación fuera de registro: desde ahora no guardo nada de lo que "
        "hablemos (ni mensajes, ni resumen, ni recuerdos nuevos), aunque sigo sabiendo lo que ya "
        "sabía de ti. Termina con /incognito off, con /reset o tras {minutes} min sin mensajes.",
        "incognito_off": "Fin de la conversación fuera de registro: no queda nada de ella. Desde "
        "ahora vuelvo a recordar lo que hablemos.",
        "incognito_none": "No estábamos fuera de registro: lo que hablamos se recuerda.",
        "followups_offer": "{name} puede escribirte después de lo que le has contado que vas a "
        "hacer (una entrevista, una cita…) para preguntarte qué tal fue: una vez, a una hora "
        "razonable y solo por privado. Actívalo con /avisos on (y /avisos off para pararlo).",
        "followups_on": "Avisos activados: {name} te escribirá por privado después de lo que le "
        "cuentes que vas a hacer, como mucho {per_week} veces por semana. /avisos off los para.",
        "followups_off": "Avisos desactivados: {name} solo te escribirá cuando tú le escribas.",
        "photo_no_vision": "Con la configuración de ahora no puedo ver fotos: cuéntame con "
        "palabras qué sale.",
        "photo_too_big": "Esa foto es demasiado grande (el límite es {limit} MB). Mándala más "
        "pequeña o comprimida.",
        "photo_bad_type": "Solo puedo ver fotos JPEG, PNG, GIF o WebP.",
        "photo_failed": "No he podido ver bien la foto. ¿Me la mandas otra vez dentro de un rato?",
        "incognito_expired": "La conversación fuera de registro terminó tras un rato sin "
        "mensajes, y ese mensaje no lo he guardado. Reenvíalo para hablar con memoria, o escribe "
        "/incognito para seguir sin dejar rastro.",
        # memory/ refusals, by code
        "no_fact": "No hay ningún recuerdo #{id} en tu memoria.",
        "bad_value": "Ese valor no se puede guardar en «{key}»: tiene que ser un dato sobre ti "
        "con el formato de ese campo, no una instrucción.",
        "not_pending": "El recuerdo #{id} no está esperando revisión.",
        "bad_duration": "«{given}» no es una duración: usa un número y d, w, m o y (30d, 2w, "
        "6m, 1y), o «nunca».",
        # /memoria
        "mem_stated": "contado por ti",
        "mem_inferred": "deducido",
        "mem_imported": "importado",
        "mem_confirm": "por confirmar",
        "mem_pending": "Pendientes de tu revisión",
        "mem_none": "No recuerdo nada de ti todavía.",
        "mem_limited": "Demasiadas peticiones de borrado o exportación seguidas. "
        "Vuelve a probar dentro de {seconds} s.",
        "mem_title": "Lo que {name} recuerda de ti",
        "mem_kind_semantic": "Quién eres",
        "mem_kind_emotional": "Cómo te sientes",
        "mem_kind_episodic": "Lo que te ha pasado",
        "mem_fact": "#{id} {key}: {value} ({origin}, desde el {date})",
        "mem_in_this_group": "aprendido en este grupo",
        "mem_in_a_group": "aprendido en un grupo",
        "mem_others_in_group": "Lo que {name} aprendió de ti en este grupo",
        "mem_before": "antes: {value} (hasta el {date})",
        "mem_fixed": "Corregido: #{id} {key} = {value}.",
        "mem_deleted": "Borrado #{id}.",
        "why_journey": "Vuestra historia (El Viaje), escrita el {date}.",
        "why_journey_rewritten": "Vuestra historia (El Viaje), tal como era entonces: se ha "
        "reescrito o borrado después (mira /memoria historia).",
        "mem_ask_forget": "¿Borro TODO lo que {name} sabe de ti (conversaciones, resúmenes, "
        "datos)? No se puede deshacer.",
        "mem_yes": "Sí, borrar todo",
        "mem_no": "Cancelar",
        "mem_forgotten": "Hecho: {name} te ha olvidado por completo.",
        "mem_cancelled": "Cancelado.",
        "mem_review_on": "Modo revisión activado: los datos nuevos esperarán tu visto bueno.",
        "mem_review_off": "Modo revisión desactivado.",
        "mem_accept": "Aceptar",
        "mem_reject": "Rechazar",
        "mem_accepted": "Aceptado #{id}.",
        "mem_rejected": "Rechazado y borrado #{id}.",
        "mem_expire": "#{id} caduca ahora: {when}.",
        "mem_never": "nunca",
        "mem_export": "Aquí tienes todo lo que {name} recuerda de ti.",
        "mem_summary": "De qué va la conversación de ahora",
        "mem_summary_past": "De qué hablamos la última vez",
        "mem_history_title": "Historial de #{id} ({key})",
        "mem_history_now": "ahora: {value} ({origin}, desde el {date})",
        "mem_history_empty": "Nunca ha cambiado.",
        "why_none": "Todavía no te he contestado nada.",
        "why_title": "Mi última respuesta ({date}) salió de:",
        "why_facts": "Lo que sé de ti:",
        "why_summary": "El resumen de la conversación:",
        "why_turns": "Estos mensajes:",
        "why_nothing": "Solo de tu mensaje: no usé recuerdos.",
        "role_user": "tú",
        "role_tool": "un recuerdo",
        "sum_established_facts": "Hechos",
        "sum_relationship": "Cómo nos llevamos",
        "sum_commitments": "Cosas pendientes",
        "sum_tone": "El tono",
        "sum_open_threads": "Temas abiertos",
        "sum_canon": "Lo que no cambia",
        "months": "ene feb mar abr may jun jul ago sep oct nov dic",
    },
    "en": {
        "help": "You are talking to {name}. Write and I answer; I remember what you tell me.\n"
        "{commands}",
        "start_hint": "({help}: what I can do and which commands there are)",
        "characters": "Available characters (now: {current}):",
        "switched": "You are now talking to {name}.",
        "unknown_character": "I don't know '{given}'. Available: {valid}.",
        "bound": "This channel is now bound to {name}: they will answer every message.",
        "unbound": "This channel is no longer bound to a character.",
        "admins_only": "Only the bot's operator can do that (their id is in ADMIN_IDS).",
        "manage_telegram": "Only this group's admins (or the bot's operator) can do that.",
        "manage_discord": "Only members with Manage Server (or Manage Channels in this "
        "channel), or the bot's operator, can do that.",
        "character_not_here": "{name} is not available in this community: the bot's operator "
        "decides that.",
        "whoami": "Your ids: {ids}",
        "reset": "Conversation ended. What matters is kept; the next one starts fresh.",
        "reset_none": "There was no open conversation.",
        "rate_limited": "You're going fast: I'll answer all of it in {seconds} s.",
        "too_long": "Your message has {length} characters and the limit is {limit} ({over} "
        "over). Please split it into shorter messages.",
        "attachment": "For now I only read text: tell me in words.",
        "empty": "I see no text in that message.",
        "error": "Something went wrong on my side. Please try again in a moment.",
        "private_pointer": "I've answered you in private.",
        # Groups (a scene's own wording is in bot/texts_scenes.py)
        "incognito_group": "A group has no off-the-record conversation: what is said here, "
        "everyone hears. Write to me in private and use /incognito there.",
        "start_private": "To see it in private, open a private chat with me and send /start.",
        "reload_refused": "Refused: still serving the previous version of these files; the rest "
        "is reloaded.",
        "reloaded": "Characters reloaded ({count}): {ids}.",
        "usage": "Usage: {usage}",
        "unknown_command": "I don't know /{given}. Commands: {valid}.",
        "terminal_header": "{name}. /help: the commands; /press DATA presses a button; /quit "
        "(or Ctrl-D) leaves.",
        "written_to": "(written to {path})",
        "cancel_too_late": "(too late to cancel: your message and this reply were kept)",
        "cancel_kept": "(reply cancelled; your message was kept and the next reply will see it)",
        "cancel_not_kept": "(reply cancelled; your message was not kept)",
        # /timezone, /incognito
        "zone_set": "Your time zone is now {zone} (it is {time} there).",
        "zone_bad": "I do not know the time zone “{given}”. Use a name such as "
        "Europe/London or America/New_York.",
        "incognito_on": "Off the record: from now on I keep nothing of what we say (no "
        "messages, no summary, no new memories), though I still know what I knew about you. It "
        "ends with /incognito off, /reset, or after {minutes} min without messages.",
        "incognito_off": "The off-the-record conversation is over: nothing of it is kept. From "
        "now on I remember what we talk about again.",
        "incognito_none": "We were not off the record: what we talk about is remembered.",
        "followups_offer": "{name} can write to you after something you said you were going to "
        "do (an interview, an appointment…) to ask how it went: once, at a sensible hour, and "
        "only in private. Turn it on with /followups on (and off with /followups off).",
        "followups_on": "Follow-ups on: {name} will write to you in private after things you "
        "say you are going to do, at most {per_week} times a week. /followups off stops them.",
        "followups_off": "Follow-ups off: {name} will only write when you do.",
        "photo_no_vision": "With the current set-up I cannot see photos: tell me in words what "
        "is in it.",
        "photo_too_big": "That photo is too big (the limit is {limit} MB). Send a smaller or "
        "compressed one.",
        "photo_bad_type": "I can only see JPEG, PNG, GIF or WebP photos.",
        "photo_failed": "I could not make out the photo. Could you send it again in a while?",
        "incognito_expired": "The off-the-record conversation ended after a while without "
        "messages, and I did not keep that message. Send it again to talk on the record, or "
        "type /incognito to stay off it.",
        "no_fact": "There is no memory #{id} in your memory.",
        "bad_value": "That value cannot be stored in “{key}”: it must be a fact about you in "
        "that field's format, not an instruction.",
        "not_pending": "Memory #{id} is not waiting for review.",
        "bad_duration": "'{given}' is not a duration: use a number and d, w, m or y (30d, 2w, "
        "6m, 1y), or 'never'.",
        "mem_stated": "told by you",
        "mem_inferred": "inferred",
        "mem_imported": "imported",
        "mem_confirm": "to confirm",
        "mem_pending": "Waiting for your review",
        "mem_none": "I don't remember anything about you yet.",
        "mem_limited": "Too many forget or export requests in a row. Try again in {seconds} s.",
        "mem_title": "What {name} remembers about you",
        "mem_kind_semantic": "Who you are",
        "mem_kind_emotional": "How you feel",
        "mem_kind_episodic": "What happened to you",
        "mem_fact": "#{id} {key}: {value} ({origin}, since {date})",
        "mem_in_this_group": "learned in this group",
        "mem_in_a_group": "learned in a group",
        "mem_others_in_group": "What {name} learned about you in this group",
        "mem_before": "before: {value} (until {date})",
        "mem_fixed": "Fixed: #{id} {key} = {value}.",
        "mem_deleted": "Deleted #{id}.",
        "why_journey": "Your story together (the journey), written on {date}.",
        "why_journey_rewritten": "Your story together (the journey), as it was then: it has "
        "been rewritten or deleted since (see /memory story).",
        "mem_ask_forget": "Delete EVERYTHING {name} knows about you (conversations, summaries, "
        "facts)? This cannot be undone.",
        "mem_yes": "Yes, delete all",
        "mem_no": "Cancel",
        "mem_forgotten": "Done: {name} has forgotten you completely.",
        "mem_cancelled": "Cancelled.",
        "mem_review_on": "Review mode on: new facts will wait for your approval.",
        "mem_review_off": "Review mode off.",
        "mem_accept": "Accept",
        "mem_reject": "Reject",
        "mem_accepted": "Accepted #{id}.",
        "mem_rejected": "Rejected and deleted #{id}.",
        "mem_expire": "#{id} now expires: {when}.",
        "mem_never": "never",
        "mem_export": "Here is everything {name} remembers about you.",
        "mem_summary": "What the current conversation is about",
        "mem_summary_past": "What we talked about last time",
        "mem_history_title": "History of #{id} ({key})",
        "mem_history_now": "now: {value} ({origin}, since {date})",
        "mem_history_empty": "It has never changed.",
        "why_none": "I haven't answered you yet.",
        "why_title": "My last reply ({date}) came from:",
        "why_facts": "What I know about you:",
        "why_summary": "The conversation's summary:",
        "why_turns": "These messages:",
        "why_nothing": "Only your message: I used no memories.",
        "role_user": "you",
        "role_tool": "a memory",
        "sum_established_facts": "Facts",
        "sum_relationship": "How we get along",
        "sum_commitments": "Things pending",
        "sum_tone": "The tone",
        "sum_open_threads": "Open topics",
        "sum_canon": "What does not change",
        "months": "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec",
    },
}
# One catalogue: what every user reads, a group's scenes, and the operators' and community
# admins' wording.
TEXTS: dict[str, dict[str, str]] = {
    lang: {**_USER_TEXTS[lang], **SCENE_TEXTS[lang], **ADMIN_TEXTS[lang]} for lang in LANGUAGES
}


def text(language: str, key: str, /, **values: object) -> str:
    return TEXTS.get(language, TEXTS["en"])[key].format(**values)


def pick_language(locale: str | None, fallback: str) -> str:
    """The user's language when the platform says it and we speak it ("es-419" -> "es"),
    else the character's (``fallback``), else English."""
    if locale:
        base = locale.replace("_", "-").split("-")[0].lower()
        if base in TEXTS:
            return base
    return fallback if fallback in TEXTS else "en"


def format_date(language: str, when: datetime) -> str:
    """A date people read: "2 nov 2026" / "2 Nov 2026"."""
    month = text(language, "months").split()[when.month - 1]
    return f"{when.day} {month} {when.year}"


def format_moment(language: str, when: datetime) -> str:
    return f"{format_date(language, when)}, {when:%H:%M}"


# The fact keys of the registry (memory/profile/fact_keys.py) as people read them on /memoria
# screens.
FACT_KEYS: dict[str, dict[str, str]] = {
    "es": {
        "name": "nombre", "preferred_name": "cómo prefieres que te llamen",
        "pronouns": "pronombres", "age": "edad", "birthday": "cumpleaños", "language": "idioma",
        "form_of_address": "trato", "city": "ciudad", "country": "país",
        "hometown": "de dónde eres", "home": "casa", "job": "trabajo",
        "workplace": "lugar de trabajo", "studies": "estudios", "partner": "pareja",
        "children": "hijos", "family": "familia", "friends": "amigos", "pets": "mascotas",
        "likes": "te gusta", "dislikes": "no te gusta", "hobbies": "aficiones",
        "interests": "intereses", "diet": "alimentación", "health": "salud",
        "routine": "rutina", "values": "valores", "feeling": "cómo te sientes",
        "fear": "miedos", "need": "necesidades", "communication_style": "cómo te comunicas",
        "goal": "objetivos", "event": "acontecimiento", "other": "otro dato",
    },
    "en": {
        "name": "name", "preferred_name": "what you like to be called", "pronouns": "pronouns",
        "age": "age", "birthday": "birthday", "language": "language",
        "form_of_address": "how to address you", "city": "city", "country": "country",
        "hometown": "where you are from", "home": "home", "job": "job",
        "workplace": "workplace", "studies": "studies", "partner": "partner",
        "children": "children", "family": "family", "friends": "friends", "pets": "pets",
        "likes": "likes", "dislikes": "dislikes", "hobbies": "hobbies",
        "interests": "interests", "diet": "diet", "health": "health", "routine": "routine",
        "values": "values", "feeling": "how you feel", "fear": "fears", "need": "needs",
        "communication_style": "how you communicate", "goal": "goals", "event": "event",
        "other": "other",
    },
}  # fmt: skip


def fact_key_label(language: str, key: str) -> str:
    """A stored fact key in words: its registry entry's label ("pets_2" -> "mascotas 2"); a
    key from before the registry is shown as written."""
    base, _, number = key.rpartition("_")
    if not (number.isdigit() and base in FACT_KEYS[language]):
        base, number = key, ""
    label = FACT_KEYS[language].get(base)
    if label is None:
        return key.replace("_", " ")
    return f"{label} {number}" if number else label
