"""What the bot itself says (not the characters), in Spanish and English."""

from __future__ import annotations

TEXTS: dict[str, dict[str, str]] = {
    "es": {
        "help": "Hablas con {name}. Escríbeme y te contesto; recuerdo lo que me cuentas.\n"
        "/personaje: ver o cambiar de personaje\n/reset: terminar la conversación actual\n"
        "/memoria: ver, corregir, borrar o exportar lo que recuerdo de ti\n/ayuda: esta ayuda",
        "characters": "Personajes disponibles (ahora: {current}):",
        "switched": "Ahora hablas con {name}.",
        "unknown_character": "No conozco a «{given}». Disponibles: {valid}.",
        "bound": "Este canal queda vinculado a {name}: contestará a todos los mensajes.",
        "unbound": "Este canal ya no está vinculado a ningún personaje.",
        "admins_only": "Solo un administrador puede hacer eso.",
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
        "start_private": "Para verlo en privado, ábreme un chat privado y escribe /start.",
        "reload_refused": "Rechazado: sigo con la versión anterior de los personajes.",
    },
    "en": {
        "help": "You are talking to {name}. Write and I answer; I remember what you tell me.\n"
        "/personaje: see or switch characters\n/reset: end the current conversation\n"
        "/memoria: see, fix, delete or export what I remember about you\n/ayuda: this help",
        "characters": "Available characters (now: {current}):",
        "switched": "You are now talking to {name}.",
        "unknown_character": "I don't know '{given}'. Available: {valid}.",
        "bound": "This channel is now bound to {name}: they will answer every message.",
        "unbound": "This channel is no longer bound to a character.",
        "admins_only": "Only an admin can do that.",
        "reset": "Conversation ended. What matters is kept; the next one starts fresh.",
        "reset_none": "There was no open conversation.",
        "rate_limited": "You're going fast: I'll answer all of it in {seconds} s.",
        "too_long": "Your message has {length} characters and the limit is {limit} ({over} "
        "over). Please split it into shorter messages.",
        "attachment": "For now I only read text: tell me in words.",
        "empty": "I see no text in that message.",
        "error": "Something went wrong on my side. Please try again in a moment.",
        "private_pointer": "I've answered you in private.",
        "start_private": "To see it in private, open a private chat with me and send /start.",
        "reload_refused": "Refused: still serving the previous version of the characters.",
    },
}


def text(language: str, key: str, **values: object) -> str:
    return TEXTS.get(language, TEXTS["en"])[key].format(**values)
