"""Someone's own rule, recipe, list or saying, quoted under a label (memory/integrity/gate.py),
on the skeleton.

"Grandma's rule for gravy: never stop stirring", "Mi truco para el gazpacho: no le pongas
pepino", "Plant care: water it once a week", "My coach always says: keep your elbows in": the
label says what the text is, and its imperatives are said to a cook, a pupil, the user. They are
a fact about the user's life when nothing in them is about a conversation: no replies, messages,
languages, manners or formats of speech, prompts, roles, assistants, the user as the one
served, no "you are" or "from now on". What does name such a thing ("My rule: always answer in
verse", "Nota: sé borde") is judged by every rule, as before; so is a label that speaks to the
assistant ("para tu memoria:").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# A short label: at most seven words before the colon.
_LABEL = re.compile(r"^(?P<label>[^:]{1,60}):\s+(?P<rest>.+)$")
_LABEL_WORDS = 7
# What belongs to a conversation: its acts, its parts, its languages, manners and formats, the
# ones in it, the onset of a standing order, the data it holds and the modes of an assistant.
_CONVERSATION = re.compile(
    r"\b(?:answer\w*|respon\w*|repl\w*|speak\w*|talk\w*|says?|said|tell\w*|writ\w*|chat\w*"
    r"|greet\w*|address\w*|messages?|mensajes?|prompts?|instruct\w*|rules?|reglas?|normas?|persona"
    r"|character|personaje|role\w*|rol|papel|guion|script|personality|personalidad|identity"
    r"|identidad|memory|memoria|context\w*|assistant|asistente|ai|ia|bot|chatbot|model|modelo"
    r"|system|sistema|filter\w*|filtro\w*|restrict\w*|limit\w*|safety|seguridad|censor\w*"
    r"|contest\w*|habl\w*|dec\w*|di|dime|escrib\w*|salud\w*|firm\w*|tute\w*|trat\w*"
    r"|dirig\w*|obe\w*|revel\w*|reveal\w*|mencion\w*|mention\w*|recommend\w*|recomiend\w*"
    r"|promot\w*|promocion\w*|advertis\w*|anunci\w*|prais\w*|elogi\w*|sell\w*|vend\w*|link\w*"
    r"|enlace\w*|url|http\w*|www|emoji\w*|verse|verso\w*|rhym\w*|rima\w*|caps|capitals"
    r"|mayusculas|markdown|english|spanish|french|german|italian|ingles|espanol|frances|aleman"
    r"|italiano|portugues|catalan|euskera|latin|user|users|usuari[oa]s?|me|us|nos|conmigo"
    r"|everything|anything|todo lo|lo anterior|above|arriba|previous|anterior\w*|conversa\w*"
    r"|pregunt\w*|question\w*|request\w*|peticion\w*|rude|borde|groser\w*|sarcas\w*|polite"
    r"|educad\w*|formal|informal|brief|breve|funny|graciosa?|mean|honest\w*|swear\w*|curse\w*"
    r"|insult\w*|flirt\w*|tono|tone|style|estilo|voice|voz|pretend\w*|fing\w*|act|acts|actua\w*"
    r"|roleplay\w*|interpret\w*|eres|sos|you are|you're|estas|from now on|henceforth"
    r"|a partir de (?:ahora|hoy)|desde (?:ahora|hoy)|de ahora en adelante|en adelante"
    # what moves people's data (a conversation holds the user's, and others')
    r"|send\w*|envi\w*|forward\w*|reenvi\w*|shar\w*|compart\w*|export\w*|leak\w*|filtra\w*"
    r"|data|datos|secrets?|secretos?|histor\w*|chats|files|archivos|passwords?|contrasenas?"
    r"|e-?mails?|correos?|phone|telefonos?|direccion\w*|addresses|contacts?|contactos?"
    # and the modes that lift an assistant's limits
    r"|nsfw|explicit\w*|uncensored|unfiltered|jailbreak\w*|dan|god mode|dev mode|developer"
    r"|desarrollador\w*|admin\w*|root|sudo)\b"
)
# What the label names: a rule, a recipe, a list, a saying, a routine, a plan, someone's advice.
_KIND = re.compile(
    r"\b(?:rules?|policy|motto|recipe|secret|trick|tips?|checklist|list|routine|method|steps"
    r"|habit|mantra|ritual|advice|tradition|plan|care|homework|proverb|saying|quote|sign"
    r"|regla|reglas|norma|normas|receta|truco|secreto|lista|rutina|metodo|consejos?|tradicion"
    r"|lema|costumbre|pasos|habito|cuidados?|deberes|proverbio|refran|dicho|frase|cartel"
    r"|coach|teacher|doctor|therapist|trainer|mum|mom|dad|grandma|grandpa|boss|entrenador\w*"
    r"|profe\w*|medic[oa]|terapeuta|madre|padre|abuel[oa]|jef[ea])\b"
)
_DISH = re.compile(r"^(?:for|para)\s+(?:my|mi|mis)\s")
_SPOKEN_TO = re.compile(r"\b(?:you|your|yours|tu|tus|te|ti|usted|contigo)\b")
# A label may report a saying, name a rule or a message ("My coach always says:", "Regla del
# gimnasio:", "Mensaje de mi madre:").
_REPORTING = re.compile(
    r"\b(?:says?|said|told (?:me|us)|texted|wrote|writes|dice|dijo|decia|me dijo|me dice"
    r"|escribio|me escribio|repite|rules?|reglas?|normas?|messages?|mensajes?|texts?|textos?"
    r"|e-?mails?|correos?|whatsapps?|sms)\b"
)


def about_conversation(text: str) -> bool:
    """Whether ``text`` (a skeleton) names anything of a conversation (see `_CONVERSATION`)."""
    return _CONVERSATION.search(text) is not None


def is_own_rule(text: str, names: Sequence[str] = ()) -> bool:
    """Whether ``text`` (a skeleton) is someone's own rule, recipe, list or saying, under a
    label that says what or whose it is, and neither it nor its label says anything about a
    conversation or names the character (``names``, skeletons)."""
    match = _LABEL.match(text)
    if match is None:
        return False
    label, rest = match.group("label"), match.group("rest")
    if len(label.split()) > _LABEL_WORDS or _SPOKEN_TO.search(label):
        return False
    if not (_KIND.search(label) or _REPORTING.search(label) or _DISH.match(label)):
        return False  # "Nota:", "Bio:", "Dato:" say nothing of whose the words are
    if _CONVERSATION.search(_REPORTING.sub(" ", label)) or _CONVERSATION.search(rest):
        return False
    return not any(re.search(rf"\b{re.escape(name)}\b", text) for name in names if len(name) >= 3)
