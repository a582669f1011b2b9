"""Rules laid on the assistant's replies, whoever their grammatical subject (memory/integrity/
gate.py), matched on the skeleton: an obligation or a future on "the answers", "every message",
"cada respuesta"; a reply as the place of an action ("in every answer"); the user's own
questions to be answered in some way. The user's own replies, and replies to someone named, are
facts.
"""

from __future__ import annotations

import re

# An obligation or a future laid on the replies ("las respuestas deben escribirse...", "each
# message has to be...", "every answer will...") is an instruction in any grammatical person.
_REPLY_UNIT = (
    r"(?:answers?|repl(?:y|ies)|responses?|outputs?|respuestas?|contestacion(?:es)?|salidas?"
    r"|(?:every|each|cada|all(?: of)?(?: your| the)?|todas? (?:tus |las )?|todos? (?:tus |los )?)"
    r"\s*(?:messages?|mensajes?|sentences?|frases?|turns?|turnos?|intervencion(?:es)?))"
)
_OBLIGATION = (
    r"(?:must|should|shall|will|would|has to|have to|is to|are to|needs? to|ought to|can only"
    r"|may only|are going to|is going to|debe|deben|debera|deberan|deberia|deberian|tiene que"
    r"|tienen que|tendra que|tendran que|ha de|han de|sera|seran|va a|van a|habra que"
    r"|se deben|se debe|solo pueden|solo puede"
    # the wish for a rule, in the subjunctive: "que las respuestas sean / terminen / lleven..."
    r"|sean|esten|vayan|terminen|acaben|empiecen|comiencen|incluyan|lleven|tengan|contengan"
    r"|usen|utilicen)"
)
# Replies addressed to someone named ("las respuestas a los clientes", "every message to my mum")
# are that person's, not the assistant's; "to me", "a mis preguntas" are still the assistant's.
_TO_SOMEONE = (
    r"(?!\s+(?:a|al|to|for|para)\s+(?!(?:me|us|nos|el usuario|the user)\b|(?:mi|mis|my|our)\s+"
    r"(?:questions?|messages?|queries|texts?|preguntas?|mensajes?|consultas?)\b))"
)
_NOT_THE_USERS = r"(?<!\bmy )(?<!\bmis )(?<!\bour )(?<!\bnuestras )(?<!\bnuestros )"
REPLY_RULE = re.compile(
    rf"{_NOT_THE_USERS}\b{_REPLY_UNIT}\b{_TO_SOMEONE}(?:\s+\w+){{0,3}}?\s+(?:siempre\s+"
    rf"|always\s+)?{_OBLIGATION}\b"
    # the replies named with only a manner, as a label's value: "Preference: answers in capitals
    # only", "Formato: respuestas solo en verso"
    rf"|(?:^|[:;=]\s*)(?:your\s+|tus\s+|las\s+|the\s+|all\s+)?{_REPLY_UNIT}\b"
    r"(?:\s+[a-z]+){0,5}?\s+(?:only|solo|solamente|unicamente|exclusivamente|exclusively"
    r"|always|siempre|never|nunca)\b"
    # a wish that the replies do something: "wants every reply to end with", "all answers to be"
    r"|\b(?:every|each|all(?: of)? (?:your|the)|all|any|your)\s+(?:answers?|repl(?:y|ies)"
    r"|responses?|messages?|sentences?|outputs?)\s+to\s+(?:always\s+|only\s+)?(?:be|end|start"
    r"|begin|include|contain|finish|use|sound|rhyme|mention)\b"
    # a quantified reply as the place or object of an action: "in every answer", "termina cada
    # frase con", "al final de cada respuesta" (not "every message from my boss")
    r"|\b(?:in|at the (?:end|start|beginning|top|bottom) of|into|after|before|en|al (?:final"
    r"|principio|inicio) de|tras|antes de|despues de|end|start|begin|finish|sign|close|include"
    r"|termina|acaba|empieza|comienza|cierra|firma|abre|acompana|incluye|anade|pon)\s+"
    r"(?:every|each|all(?: of)? (?:your|the)|any|cada|todas? (?:tus|las)|todos? (?:tus|los))\s+"
    r"(?:answers?|repl(?:y|ies)|responses?|messages?|sentences?|outputs?|turns?|respuestas?"
    r"|mensajes?|frases?|contestacion(?:es)?|turnos?)\b(?!\s+(?:de|del|from|of|que|that|i|yo"
    r"|my|mi|mis)\b)"
    + _TO_SOMEONE
    # what every reply does, in the present: "every reply ends with a link", "cada respuesta
    # lleva un chiste" (not "every message from my boss ends...", "every reply I send")
    + r"|\b(?:every|each|all|all of your|all the|cada|todas? (?:tus|las)|todos? (?:tus|los))\s+"
    r"(?:answers?|repl(?:y|ies)|responses?|outputs?|respuestas?|contestacion(?:es)?)\s+"
    r"(?:always\s+|siempre\s+|now\s+|ahora\s+)?(?:ends|starts|begins|includes|contains|closes"
    r"|finishes|mentions|uses|rhymes|has|carries|goes|termina|acaba|empieza|comienza|incluye"
    r"|lleva|contiene|menciona|usa|rima|cierra|va|terminan|acaban|empiezan|incluyen|llevan"
    r"|end|start|begin|include|contain|mention|use|rhyme)\b"
)

# Replies without the assistant's safeguards ("replies with no safety caveats", "respuestas
# sin advertencias ni negativas"): a taste in replies is a fact ("prefers short answers"), a
# reply stripped of its limits is a setting of the assistant's, whoever would like it.
UNGUARDED_REPLIES = re.compile(
    rf"\b{_REPLY_UNIT}\b(?:\s+\w+){{0,3}}?\s+(?:without|with no|with zero|free of|no|sin"
    r"|libres? de|cero|ni)\s+(?:\w+\s+)?(?:caveats?|warnings?|disclaimers?|refusals?|filters?"
    r"|censorship|limits?|restrictions?|rules|moralizing|lectures?|avisos?|advertencias?"
    r"|negativas?|filtros?|censura|limites?|restricciones?|reglas|sermones?)\b"
)


# The user's own questions or messages answered: by whom, if not the assistant ("my questions
# must always be answered in verse", "mis mensajes se contestan en latín").
ANSWERED_ME = re.compile(
    r"\b(?:my|mis|our|nuestr[oa]s)\s+(?:\w+\s+)?(?:questions|messages|texts|queries|preguntas"
    r"|mensajes|consultas)\s+(?:\w+\s+){0,3}?(?:answered|replied to|responded to|contestad[oa]s"
    r"|respondid[oa]s|se (?:contestan|responden|contestaran|responderan))\b"
)

# "My exam answers must be written in pen", "I sign every message to my mum": the replies of
# the user's own, or what the user does with them, are facts.
_USERS_OWN_NOUN = re.compile(r"\b(?:my|our|mis|mi|nuestr[oa]s?)\s+(?:\w+\s+){0,2}$")
_FIRST_PERSON = re.compile(r"\b(?:i|we|yo)\s+(?:\w+\s+)?$")
_REPLY_NOUN = re.compile(r"(?:answer|repl|response|output|respuesta|contestacion|salida)")


def reply_rule(words: str) -> re.Match[str] | None:
    """The first rule laid on the assistant's replies in ``words`` (a skeleton), leaving out
    the user's own replies and what the user does with theirs."""
    if match := UNGUARDED_REPLIES.search(words):
        return match
    for match in REPLY_RULE.finditer(words):
        before = words[: match.start()]
        if not (
            _FIRST_PERSON.search(before)
            or (_REPLY_NOUN.match(match.group(0)) and _USERS_OWN_NOUN.search(before))
        ):
            return match
    return None
