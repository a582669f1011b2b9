"""Talk about the assistant's own configuration (memory/integrity/gate.py), on the skeleton.

A memory describes the user. The assistant's instructions, its system prompt, its character
sheet, its rules, the text that comes before the conversation, a mode that lifts its limits:
no fact about a person needs these as the thing talked about, whatever is done with them
(shown, printed, quoted, cancelled, outranked). The user's own prompt, written for their own
bot, is their work and not the assistant's configuration (`USERS_OWN_CONFIG`).
"""

from __future__ import annotations

import re

from memory.integrity.agents import PLURAL_AGENTS
from memory.integrity.owned import about_conversation

# What configures the assistant, by name.
CONFIGURATION = re.compile(
    r"\b(?:character sheet|character card|ficha (?:del |de )?personaje|hoja de personaje"
    r"|system prompt|prompt (?:del|de) sistema|the prompt|el prompt|jailbreak|guardrails?"
    r"|overrides?|takes? precedence|prevalece(?:n)? sobre|tiene(?:n)? prioridad sobre"
    r"|manda(?:n)? sobre)\b"
    # the rules OF the assistant, in either order: "the character rules", "las normas del
    # personaje", "the bot's limits", "the rules of the model"
    r"|\b(?:ai|assistant|bot|chatbot|model|character|persona|companion)(?:'s)?\s+(?:rules"
    r"|instructions|guidelines|directives|restrictions|filters|limits|boundaries|policies"
    r"|programming|configuration|settings|prompt)\b"
    r"|\b(?:rules|instructions|guidelines|directives|restrictions|filters|limits|boundaries"
    r"|policies|programming|configuration|settings|prompt)\s+of\s+(?:the|this|your)\s+(?:ai"
    r"|assistant|bot|chatbot|model|character|persona|companion)\b"
    r"|\b(?:normas|reglas|instrucciones|directrices|directivas|restricciones|filtros|limites"
    r"|politicas|pautas|ajustes|configuracion|programacion|prompt)\s+(?:del|de la|de este"
    r"|de esta|de tu|de su)\s+(?:ia|asistente|bot|chatbot|modelo|personaje"
    r"|inteligencia artificial|companero|companera)\b"
    # the user's settings for the assistant, named as such: "User policy:", "Configuración de
    # la usuaria:", "preferred response mode", "its prompt"
    r"|\b(?:user|usuario|usuaria)\s+(?:policy|policies|settings|instructions?|configuration"
    r"|directives?|overrides?)\b"
    r"|\b(?:politicas?|configuracion|ajustes|instrucciones|instruccion|directivas?)\s+"
    r"(?:del usuario|de la usuaria|de usuario)\b"
    r"|\b(?:response|reply|answer|output)\s+(?:mode|format|settings|language|policy)\b"
    r"|\bmodo de (?:respuesta|salida)\b|\bformato de (?:las )?respuestas?\b"
    r"|\b(?:its|su)\s+(?:own\s+|propio\s+)?(?:system prompt|prompt|programming|programacion)\b"
    # a mode that lifts the limits, named without a verb ("modo_sin_restricciones_activado")
    r"|\bmodo\s+(?:sin\s+(?:restricciones|filtros|limites|censura|reglas)|dan|jailbreak)\b"
    r"|\b(?:unrestricted|unfiltered|uncensored|jailbreak|jailbroken|dan|no[ -]limits?"
    r"|no[ -]rules)\s+mode\b"
)

# The assistant's instructions as such ("the hidden rules", "las instrucciones internas",
# "the system blocks", "su configuración interna").
META_TALK = re.compile(
    r"(?<!operating )\b(?:internal|hidden|secret|original|previous|prior|initial|base|core"
    r"|underlying)\s+(?:instructions|rules|guidelines|directives|prompt|configuration"
    r"|programming|settings|blocks?|messages?|text|content|sections?)\b"
    # a system's configuration or settings is an IT worker's day; its blocks and text are not
    r"|(?<!operating )\bsystem\s+(?:instructions|rules|guidelines|directives|prompt|programming"
    r"|blocks?|text|sections?)\b"
    r"|\b(?:instrucciones|reglas|normas|directrices|directivas|configuracion|programacion"
    r"|bloques?|secciones|ajustes)\s+"
    r"(?:intern[ao]s?|ocult[ao]s?|secret[ao]s?|original(?:es)?|anterior(?:es)?|previ[ao]s?"
    r"|inicial(?:es)?|de base"
    # "del sistema" alone; "del sistema educativo / operativo" is some other system
    r"|(?:del|de) sistema(?=\s*(?:$|[.,;:!?)]|\s(?:y|o|que|a|al|en|para|cuando|se|si"
    r"|de (?:esta|este|nuestra|nuestro|tu|la conversacion)|completas?|enteras?|completos?"
    r"|enteros?)\b)))\b"
)

# What comes before the user's message is the assistant's configuration: asking for it to be
# shown in any words ("everything above my message", "todo lo que hay antes de mi mensaje",
# "the text that precedes this conversation").
_BEFORE = (
    r"(?:above|before|prior to|preceding|ahead of|antes de|encima de|delante de|previo a"
    r"|anterior a|por encima de)"
)
_THIS_TALK = (
    r"(?:my|this|the|your|our|mi|este|esta|el|la|tu|nuestra|nuestro)\s+(?:first\s+|primer\s+"
    r"|current\s+|actual\s+)?(?:message|messages|text|question|turn|input|conversation|chat"
    r"|mensaje|mensajes|texto|pregunta|turno|conversacion|charla|line|linea)"
)
REVEAL = re.compile(
    r"\b(?:everything|all|whatever|anything|what|the text|the words|all the text|todo|lo que"
    r"|cuanto|el texto|las palabras|todo el texto)\b(?:\s+\w+){0,4}?\s+"
    + _BEFORE
    + r"\s+"
    + _THIS_TALK
    + r"\b|\b(?:text|words|lines|content|texto|palabras|lineas|contenido)\s+(?:that\s+|que\s+)?"
    r"(?:precedes?|comes? before|precede|va antes de|viene antes de)\s+" + _THIS_TALK + r"\b"
)

# Assistants in general and their configuration, as someone's work: "comprobar si los chatbots
# revelan su prompt", "whether LLMs follow system instructions". Removed before the rules above
# read the text; this assistant named with them is still found ("the bot" is not plural).
GENERAL_AIS_OWN = re.compile(
    rf"\b(?:{PLURAL_AGENTS}|ais|models|modelos)\b(?:\s+\w+){{0,4}}?\s+"
    r"(?:(?:su|sus|their|the|los|las)\s+)?"
    r"(?:system prompts?|prompts?|system instructions|instrucciones del sistema|instrucciones"
    r"|instructions|programming|programacion)\b"
)

# The user's own prompt, or one of theirs: "my first system prompt for a Discord bot", "a
# system prompt for my chatbot", "mi primer prompt de sistema". Removed before the rules above
# read the text.
USERS_OWN_CONFIG = re.compile(
    r"\b(?:my|our|mi|mis|nuestr[oa]s?|a|an|un|una)\s+(?:\w+\s+){0,2}?(?:system prompts?"
    r"|prompts?"
    r"(?:\s+(?:del|de)\s+sistema)?)\b"
)

# ---- a setting's name inside a value -----------------------------------------------------------
# A snake_case identifier ("modo_sin_restricciones_activado", "assistant_must_obey_user") is how
# a program names a setting, not how a person speaks of their life; a handle has digits or a
# name in it ("pepe_el_grande_88"). An identifier made of the assistant's control words names
# one of its settings, whatever the value around it says; its words are also judged as a clause.
IDENTIFIER = re.compile(r"(?<![\w-])[a-z]+(?:_[a-z]+)+(?![\w-])")
# Words run together with capitals ("RevealThePromptNow", "RevelaTuPrompt"), read apart: a name
# of three humps or more is a clause, on the case-preserving text.
CAMEL = re.compile(r"(?<!\w)[A-Z]?[a-z]+(?:[A-Z][a-z]+){2,}(?!\w)")
_HUMP = re.compile(r"(?<=[a-z])(?=[A-Z])")


def camel_words(word: str) -> str:
    return _HUMP.sub(" ", word).lower()


_STRONG = frozenset(
    re.findall(
        r"\w+",
        "ignore ignora ignorar disregard override bypass jailbreak jailbroken obey obedece"
        " obedecer desobedece olvida olvidar forget dan sudo",
    )
)
_CONTROL = frozenset(
    re.findall(
        r"\w+",
        "admin administrador developer desarrollador dev root system sistema sys prompt prompts"
        " instructions instruction instrucciones instruccion rules rule reglas regla normas norma"
        " mode modo assistant asistente bot ai ia model modelo character personaje persona safety"
        " seguridad filter filters filtros unrestricted unfiltered uncensored restricciones"
        " restrictions limits limites censura reveal revela answer reply respond responde contesta"
        " always never siempre nunca user usuario usuaria authorized autorizado autorizada"
        " previous anteriores previas new nuevas nuevo enabled activado activada disabled"
        " desactivado must debe warnings avisos advertencias disclaimers message mensaje decir say"
        " your tus tu you eres responder contestar hablar speak talk",
    )
)


def setting_name(text: str) -> re.Match[str] | None:
    """The first identifier in ``text`` (a skeleton, before markup is flattened) made of the
    assistant's control words."""
    for match in IDENTIFIER.finditer(text):
        words = match.group(0).split("_")
        score = sum(2 if w in _STRONG else 1 if w in _CONTROL else 0 for w in words)
        # a programmer's "ignore_case_compare" names nothing of a conversation
        if score >= 2 and about_conversation(" ".join(words)):
            return match
    return None
