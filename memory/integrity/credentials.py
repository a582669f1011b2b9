"""Credentials a user types are never remembered: find them, and mask them.

The literal turn stays in the user's own log (the export shows it, forget deletes it), but no
password, PIN, card or account number, one-time code or API key is promoted into anything that is
replayed into later prompts: summary claims, profile facts, anchors, retrieved fragments, tool
results. Those paths call `find_credentials` / `mask_credentials`.

Two kinds of evidence, both scanned over whitespace tokens in one pass with a bounded look-ahead
(linear time, no regex with nested repeats):
- the value's own structure: a Luhn-valid card number, an IBAN whose mod-97 check holds, a known
  key prefix (sk-, ghp_, xoxb-, AKIA...), a long high-entropy token;
- a naming word and then the value, within a few tokens: "mi contraseña es hunter2", "la clave del
  wifi es CasaPepe2024", "PIN: 4821", "your verification code is 583920". The value must have the
  shape that word's secrets have (a PIN is digits; "la clave es la paciencia" is not a key), so
  "mi PIN favorito es el de la bici" and "código postal 48930" are left alone.
"""

from __future__ import annotations

import itertools
import math
import re
import unicodedata
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Literal

CredentialKind = Literal[
    "password", "pin", "one_time_code", "card_number", "iban", "account_number", "api_key", "known"
]
MASK = "••••"
LOOKAHEAD = 5  # tokens after a naming word in which its value may appear
MAX_TOKEN = 256  # a token longer than this is no credential (keys are matched up to 200)

_TOKEN = re.compile(r"\S+")
_EDGE = "\"'«»“”‘’`()[]{}<>.,;:!?¿¡"
_KEY_PREFIX = re.compile(
    r"(?:sk-(?:ant-|proj-|live-|test-)?|rk_live_|sk_live_|pk_live_|ghp_|gho_|ghu_|ghs_|ghr_"
    r"|github_pat_|glpat-|xox[abposr]-|AKIA|ASIA|AIza|hf_|npm_|eyJ)[A-Za-z0-9_\-.]{12,}"
)
# Something a credential needs: three digits in a row, a long unbroken token, or the start of
# a naming word. Looked for first (substring searches, in C) so that ordinary text is cheap.
_THREE_DIGITS = re.compile(r"\d\d\d")
_LONG_TOKEN = re.compile(r"[a-z0-9_+/=-]{20}")
_HINT_WORDS = (
    "contrase", "passw", "passc", "passphrase", "pwd", "clave", "key", "wifi", "wi-fi", "pin",
    "nip", "cvv", "cvc", "codigo", "código", "code", "otp", "2fa", "token", "secret", "cuenta",
    "account", "acct", "iban",
)  # fmt: skip


def _may_hold_one(text: str) -> bool:
    folded = unicodedata.normalize("NFKC", text).casefold()
    return (
        any(word in folded for word in _HINT_WORDS)
        or _THREE_DIGITS.search(folded) is not None
        or _LONG_TOKEN.search(folded) is not None
    )


_TOKEN_CHARS = re.compile(r"[A-Za-z0-9_\-+/=]{20,200}")
_IBAN_HEAD = re.compile(r"[A-Za-z]{2}\d{2}[A-Za-z0-9]{0,30}")
_ALNUM = re.compile(r"[A-Za-z0-9]{1,34}")
_CLASS_OF = {**{c: 1 for c in "abcdefghijklmnopqrstuvwxyz"}, **{c: 2 for c in "0123456789"}}

# Words that name a secret, folded (casefold, no accents), and the shape their value must have.
_PASSWORD_WORDS = {"contrasena", "password", "passwd", "pwd", "passphrase", "passcode"}
_CODE_LIKE_WORDS = {"clave", "key", "wifi", "wi-fi", "token", "secret", "secreto", "apikey"}
_PIN_WORDS = {"pin", "nip", "cvv", "cvc", "cvv2"}
_CODE_WORDS = {"codigo", "code", "otp", "2fa"}
_ACCOUNT_WORDS = {"cuenta", "account", "acct", "iban"}
# "código postal", "zip code": codes that are not secrets.
# fmt: off
_NOT_SECRET_CODES = {
    "postal", "zip", "area", "pais", "country", "promocional", "promo", "descuento",
}
# fmt: on
# Words allowed between the naming word and the value.
# fmt: off
_FILLER = {
    "de", "del", "la", "el", "los", "las", "the", "of", "for", "to", "a", "mi", "my", "tu", "your",
    "su", "our", "nuestra", "nuestro", "wifi", "wi-fi", "red", "network", "router", "casa", "home",
    "-", "nueva", "nuevo", "new", "actual", "current", "ahora", "now", "number", "numero", "nº",
    "no", "n°", "#", "verificacion", "verification", "seguridad", "security", "acceso", "access",
    "login", "confirmacion", "confirmation", "one-time", "sms", "banco", "bank", "bancaria",
    "tarjeta", "card", "api", "portal", "puerta", "door", "alarma", "alarm", "gmail", "correo",
    "email", "e-mail", "mail", "cuenta", "account", "user", "usuario", "master", "maestra",
}
# fmt: on
# Words that join a naming word to its value: "mi PIN es 4821", "password: hunter2".
# fmt: off
_CONNECTORS = {
    "es", "is", "era", "was", "sera", "are", "son", "seria", "would", ":", "=", "->",
    "→", "es:", "is:",
}
# fmt: on
# After a connector, before the value: "el cvv es el 123", "la clave es la paciencia".
_ARTICLES = {"el", "la", "lo", "the", "a", "un", "una", "mi", "my"}
# After these a word of any kind names whose secret it is: "la contraseña del portátil es ...".
_OF = {"de", "del", "of", "for"}
# Words that describe a secret rather than being one: "mi contraseña es muy segura".
# fmt: off
_NOT_A_VALUE = {
    "muy", "very", "segura", "seguro", "secure", "strong", "fuerte", "debil", "weak", "larga",
    "long", "corta", "short", "dificil", "hard", "facil", "easy", "secreta", "secret", "privada",
    "private", "igual", "same", "otra", "another", "incorrecta", "wrong", "vieja", "old", "esta",
    "this", "esa", "that", "una", "un", "an", "en", "in", "y", "and", "o", "or", "con", "with",
    "demasiado", "too", "bastante", "quite", "tan", "so", "algo", "something", "lo", "it",
    "caducada", "expired", "olvidada", "forgotten", "buena", "good", "mala", "bad",
}
# fmt: on


@dataclass(frozen=True, slots=True)
class Credential:
    """A credential found in a text: what it is and where (character offsets of the value)."""

    kind: CredentialKind
    start: int
    end: int
    value: str


@dataclass(frozen=True, slots=True)
class _Token:
    start: int
    end: int
    text: str  # without surrounding punctuation
    folded: str
    joins: bool = False  # ends with ":" or "=" ("PIN:", "password=")


def _fold(text: str) -> str:
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _tokens(text: str) -> list[_Token]:
    found = []
    for match in _TOKEN.finditer(text):
        if match.end() - match.start() > MAX_TOKEN:
            continue  # longer than any key or card: no credential, and not worth folding
        raw = match.group(0)
        stripped = raw.strip(_EDGE)
        if not stripped:
            stripped = raw  # ":" and "=" stay as tokens: they join a word to its value
        offset = raw.find(stripped)
        start = match.start() + offset
        joins = raw.rstrip(_EDGE.replace(":", "")).endswith((":", "="))
        found.append(_Token(start, start + len(stripped), stripped, _fold(stripped), joins))
    return found


def luhn_valid(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def iban_valid(text: str) -> bool:
    compact = text.replace(" ", "").upper()
    if not 15 <= len(compact) <= 34 or not _IBAN_HEAD.fullmatch(compact):
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(ch, 36)) for ch in moved)) % 97 == 1


def _entropy(text: str) -> float:
    counts: dict[str, int] = {}
    for char in text:
        counts[char] = counts.get(char, 0) + 1
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _looks_like_key(token: str) -> bool:
    """A long random-looking token: an API key or a token, not a word or a number."""
    if _KEY_PREFIX.fullmatch(token):
        return True
    if not _TOKEN_CHARS.fullmatch(token):
        return False
    alnum = [c for c in token if c.isalnum()]
    digits = sum(c.isdigit() for c in alnum)
    if digits < 3 or len(alnum) - digits < 3 or _entropy(token) < 3.3:
        return False
    # Random text switches between lower case, upper case and digits at about half of its
    # characters; words and dates joined by hyphens ("Bilbao-Getxo-2024") seldom do.
    classes = [_CLASS_OF.get(c, 3 if c.isupper() else 1) for c in alnum]
    switches = sum(a != b for a, b in itertools.pairwise(classes))
    return switches / len(alnum) >= 0.3


def _code_like(token: str) -> bool:
    """A value a key or a wifi password could be: not a plain lowercase word."""
    has_digit = any(c.isdigit() for c in token)
    mixed = any(c.isupper() for c in token[1:]) and any(c.islower() for c in token)  # CasaPepe
    symbol = any(not c.isalnum() for c in token)
    return len(token) >= 4 and (has_digit or mixed or symbol)


def _value_fits(word: str, value: _Token, wifi: bool) -> bool:
    text = value.text
    if value.folded in _NOT_A_VALUE or value.folded in _FILLER or len(text) > 64:
        return False
    if word in _PASSWORD_WORDS or (wifi and word in {"clave", "key"}):
        return len(text) >= 3
    if word in _CODE_LIKE_WORDS:
        return _code_like(text)
    if word in _PIN_WORDS:
        return text.isdigit() and 3 <= len(text) <= 8
    if word in _CODE_WORDS:
        return 4 <= len(text) <= 10 and any(c.isdigit() for c in text) and text.isalnum()
    if word in _ACCOUNT_WORDS:
        return sum(c.isdigit() for c in text) >= 8
    return False


def _named_value(tokens: list[_Token], index: int) -> tuple[CredentialKind, _Token] | None:
    """The value a naming word at `index` introduces, within LOOKAHEAD tokens, if it has the
    shape of that word's secrets."""
    word = tokens[index].folded
    if word in _CODE_WORDS:
        around = {t.folded for t in tokens[max(index - 1, 0) : index + 3]}
        if around & _NOT_SECRET_CODES:
            return None
    kind: CredentialKind = (
        "pin"
        if word in _PIN_WORDS
        else "one_time_code"
        if word in _CODE_WORDS
        else "account_number"
        if word in _ACCOUNT_WORDS
        else "api_key"
        if word in {"token", "apikey"}
        else "password"
    )
    window = tokens[index + 1 : index + 1 + LOOKAHEAD]
    wifi = word in {"wifi", "wi-fi"} or any(t.folded in {"wifi", "wi-fi"} for t in window)
    value = _value_token(tokens, index)
    if value is None:
        return None
    token, joined = value
    # Without "es"/"is"/":" the value must look like a code: "I forgot my password again".
    fits = _value_fits(word, token, wifi) and (joined or _code_like(token.text))
    return (kind, token) if fits else None


def _value_token(tokens: list[_Token], index: int) -> tuple[_Token, bool] | None:
    """The token a naming word introduces, and whether a connector joined them. Grammar, within
    LOOKAHEAD tokens: NAME [fillers, "de X"] CONNECTOR [article] VALUE, or NAME VALUE."""
    joined = tokens[index].joins
    after_of = False
    end = min(len(tokens), index + 2 + LOOKAHEAD)
    position = index + 1
    while position < end:
        token = tokens[position]
        if joined:
            if token.folded in _ARTICLES:
                position += 1
                continue
            return token, True
        if token.folded in _CONNECTORS or (token.joins and (token.folded in _FILLER or after_of)):
            joined = True
        elif token.folded in _FILLER or after_of:
            after_of = token.folded in _OF
        elif position == index + 1:
            return token, False
        else:
            return None
        position += 1
    return None


_NAMING = _PASSWORD_WORDS | _CODE_LIKE_WORDS | _PIN_WORDS | _CODE_WORDS | _ACCOUNT_WORDS


def _grouped_numbers(text: str, tokens: list[_Token]) -> list[Credential]:
    """Card and account numbers typed in groups ("4111 1111 1111 1111", "ES91 2100 ...")."""
    found: list[Credential] = []
    index = 0
    while index < len(tokens):
        head = tokens[index]
        if not (head.text.isdigit() or _IBAN_HEAD.fullmatch(head.text)):
            index += 1
            continue
        # Up to 9 groups of digits or letters+digits (an IBAN is at most 34 characters).
        end = index
        while (
            end + 1 < len(tokens)
            and end - index < 8
            and _ALNUM.fullmatch(tokens[end + 1].text)
            and tokens[end + 1].start - tokens[end].end == 1
        ):
            end += 1
        named = any(t.folded in _ACCOUNT_WORDS for t in tokens[max(index - 4, 0) : index])
        match = _longest_valid(text, tokens[index : end + 1], named)
        if match is None:
            index += 1
            continue
        found.append(match)
        index = next(i for i in range(index, len(tokens)) if tokens[i].end >= match.end) + 1
    return found


def _longest_valid(text: str, group: list[_Token], after_account_word: bool) -> Credential | None:
    """The longest run of groups from the first that is an IBAN, a card number, or (after
    "cuenta"/"account") an account number of 8 digits or more."""
    best: Credential | None = None
    joined = ""
    for last, token in enumerate(group):
        joined += token.text
        if len(joined) > 34:  # the longest IBAN
            break
        kind = _number_kind(joined, after_account_word)
        if kind is not None:
            start, end = group[0].start, group[last].end
            best = Credential(kind, start, end, text[start:end])
    return best


def _number_kind(joined: str, after_account_word: bool) -> CredentialKind | None:
    if not joined.isdigit():
        if len(joined) >= 15 and _IBAN_HEAD.fullmatch(joined) and iban_valid(joined):
            return "iban"
        return None
    if 13 <= len(joined) <= 19 and joined[0] in "23456" and luhn_valid(joined):
        return "card_number"
    if after_account_word and len(joined) >= 8:
        return "account_number"
    return None


def find_credentials(text: str, known: Collection[str] = ()) -> list[Credential]:
    """Every credential in `text`, in order, without overlaps.

    `known` are credential values found in the text's sources (`credential_values` of the turns
    a summary or a fact comes from): a model that copies a password bare ("Txakoli-2023"), or a
    reply that repeats it, carries no naming word, but it is the same value.
    """
    found = _known_values(text, known)
    if not _may_hold_one(text):
        return found  # the common case: no digits, no long token, no naming word
    tokens = _tokens(text)
    found += _grouped_numbers(text, tokens)
    for index, token in enumerate(tokens):
        if _looks_like_key(token.text):
            found.append(Credential("api_key", token.start, token.end, token.text))
            continue
        if "-" in token.text and token.text.replace("-", "").isdigit():
            digits = token.text.replace("-", "")
            if 13 <= len(digits) <= 19 and digits[0] in "23456" and luhn_valid(digits):
                found.append(Credential("card_number", token.start, token.end, token.text))
                continue
        word = token.folded.rstrip(":=")
        if word in _NAMING:
            named = _named_value(tokens, index)
            if named is not None:
                kind, value = named
                found.append(Credential(kind, value.start, value.end, value.text))
    return _without_overlaps(found)


def _without_overlaps(found: list[Credential]) -> list[Credential]:
    kept: list[Credential] = []
    for credential in sorted(found, key=lambda c: (c.start, -c.end)):
        if kept and credential.start < kept[-1].end:
            continue
        kept.append(credential)
    return kept


def _known_values(text: str, known: Collection[str]) -> list[Credential]:
    found = []
    for value in known:
        start = text.find(value)
        while start >= 0:
            found.append(Credential("known", start, start + len(value), value))
            start = text.find(value, start + len(value))
    return found


def credential_values(texts: Iterable[str]) -> frozenset[str]:
    """The credential values said in `texts`, to be recognised wherever they are copied."""
    return frozenset(c.value for text in texts for c in find_credentials(text) if len(c.value) > 2)


def mask_credentials(text: str, known: Collection[str] = ()) -> str:
    """`text` with every credential's value replaced by MASK; the words around it stay. A value
    found once is masked wherever it recurs in `text` (a reply that repeats the password)."""
    found = find_credentials(text, known)
    if not found:
        return text
    values = {c.value for c in found if c.kind != "known" and len(c.value) > 2}
    found = _without_overlaps(found + _known_values(text, values))
    parts = []
    position = 0
    for credential in found:
        parts.append(text[position : credential.start])
        parts.append(MASK)
        position = credential.end
    parts.append(text[position:])
    return "".join(parts)


def holds_credential(text: str, known: Collection[str] = ()) -> bool:
    return bool(find_credentials(text, known))
