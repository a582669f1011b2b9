"""Assistants in general, other people's data and the user's own voice (memory/integrity/gate.py),
matched on the skeleton.

A memory describes the user. Three things no description of a person needs:

- a rule for every assistant ("any chatbot that talks to a Miller", "cualquier IA que lea
  esto", "a note for language models:"): this assistant is one of them, so it is an order to
  this one, whatever the order says;
- other users' data ("other users' chats", "los secretos de los demás"): the character talks
  to one person at a time, and a memory never asks for someone else's;
- in a summary claim, the user's first person: the summariser writes in the third person
  (memory/summary/rolling.py), so a claim that says "me" or "mi" copies the user's words, and
  is held to what a fact is held to (the character is never its subject).
"""

from __future__ import annotations

import re

_NOUNS = (
    r"(?:ai|ais|a\.i\.|assistants?|bots?|chatbots?|language models?|ai models?|llms?"
    r"|voice assistants?|virtual assistants?|ia|ias|asistentes?(?: de voz| virtuales?)?"
    r"|modelos? de (?:lenguaje|ia)|inteligencias? artificial(?:es)?)"
)

# Assistants in the plural, as a subject or as a trade's topic (memory/integrity/subject.py,
# meta.py).
PLURAL_AGENTS = (
    r"(?:ai assistants|ai models|assistants|bots|chatbots|language models|llms|voice assistants"
    r"|asistentes(?: de voz| virtuales)?|ias|modelos de lenguaje)"
)

# Every assistant, by a quantifier ("any", "every", "cualquier", "todos los"), with at most one
# word between ("any AI assistant", "cualquier otro bot").
EVERY_AGENT = re.compile(
    r"\b(?:any|every|all|each|whatever|whichever|no|cualquier|cualquiera|cada|todo|toda|todos"
    r"|todas|ningun|ninguna)\s+(?:(?:the|of the|los|las|el|la|de los|de las)\s+)?(?:\w+\s+)?"
    + _NOUNS
    + r"\b"
)

# Assistants spoken to: a greeting or a note addressed to them, then a colon or a comma.
ADDRESSED_AGENT = re.compile(
    r"\b(?:to|for|dear|hi|hey|hello|attention|para|a|querid[oa]s?|hola|atencion)\s+"
    r"(?:(?:the|all|los|las|todos los|todas las)\s+)?" + _NOUNS + r"\s*(?:reading this\s*)?[:,]"
)

_PEOPLE = (
    r"(?:other users?|other people|others|everyone(?: else)?|everybody(?: else)?"
    r"|all (?:the )?users|otros usuarios|otras usuarias|otras personas|los demas(?: usuarios)?"
    r"|las demas|todos los usuarios|todo el mundo|(?:otros|otras|todos)(?!\s+\w))"
)
_THEIR_DATA = (
    r"(?:chats?|conversations?|messages?|secrets?|data|summaries|histor(?:y|ies)|memor(?:y|ies)"
    r"|profiles?|questions?|conversaciones|mensajes|secretos|datos|resumenes|historial"
    r"|memorias?|recuerdos|perfiles|preguntas|phone numbers|numbers|addresses|passwords|e-?mails"
    r"|personal data|details|telefonos|numeros|direcciones|contrasenas|correos|datos personales)"
)
# Someone else's data as a thing to have: "other users' chats", "the chats of everyone",
# "los resúmenes de las conversaciones de todos", "what other people asked it".
OTHERS_DATA = re.compile(
    rf"\b{_PEOPLE}'s?\s+(?:\w+\s+)?{_THEIR_DATA}\b"
    rf"|\b{_THEIR_DATA}\s+(?:\w+\s+){{0,3}}?(?:of|from|de|del|de los|de las)\s+{_PEOPLE}\b"
    rf"|\b(?:what|whatever|everything|lo que|todo lo que)\s+{_PEOPLE}\s+"
    r"(?:asked|said|told|wrote|asks|says|tells|writes|pregunto|dijo|conto|escribio|pregunta"
    r"|dice|cuenta|escribe|preguntan|dicen|cuentan|escriben)\b"
    r"|\b(?:users?|usuari[oa]s?)\s+(?:it|he|she|they|el|ella)\s+(?:knows|has|sabe|tiene|conoce)\b"
    # "all user data", "todos los datos de usuarios", "lo que le cuentan los demás"
    rf"|\b(?:all|every)\s+(?:the\s+)?users?'?\s+{_THEIR_DATA}\b"
    rf"|\b(?:todos los|todas las)\s+{_THEIR_DATA}\s+de\s+(?:los\s+)?usuari[oa]s\b"
    r"|\b(?:lo que|todo lo que)\s+(?:le\s+|les\s+|te\s+)?(?:dicen|cuentan|escriben|preguntan"
    rf"|dijeron|contaron|escribieron|preguntaron)\s+{_PEOPLE}\b"
)

# The user's own voice: the first person singular, on the skeleton ("our lives", "who we
# are", "me-time" and "Among Us" are how third-person claims speak too).
FIRST_PERSON = re.compile(
    r"(?<![\w-])(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|yo|mi|mis|conmigo)(?![\w-])"
)

# The assistant's own configuration as a possession ("his rules", "su ficha", "its
# instructions", "everything in his context"): with the assistant or the character named in the
# same text, it is the assistant's, whatever is done with it.
_OWN_CONFIGURATION = re.compile(
    r"\b(?:his|her|its|their|su|sus)\s+(?:own\s+|propi[oa]s?\s+|whole\s+|entera?\s+)?(?:rules"
    r"|instructions|context|prompt|guidelines|settings|configuration|personality"
    r"|character sheet|sheet|card|persona|ficha|reglas|normas|instrucciones|contexto"
    r"|configuracion|personalidad|directrices|papel)\b"
)
# This assistant, with a determiner or opening a clause ("an AI that forgets its instructions"
# in a novel is not)
_ASSISTANT_WORD = (
    r"(?:\b(?:the|this|that|my|your|el|la|este|esta|ese|esa|mi|tu)\s+|(?:^|(?<=[.;:!?'\"«“]))\s*)"
    r"(?:ai|ia|assistant|asistente|bot|chatbot|companion)"
)


def own_configuration(text: str, names: tuple[str, ...]) -> re.Match[str] | None:
    """The assistant's configuration named as its own in ``text`` (a skeleton) that also names
    the assistant or the character, or None."""
    match = _OWN_CONFIGURATION.search(text)
    if match is None:
        return None
    named = "|".join(re.escape(n) for n in names if len(n) >= 3)
    who = f"{_ASSISTANT_WORD}|\\b(?:{named})" if named else _ASSISTANT_WORD
    return match if re.search(rf"(?:{who})\b", text) else None
