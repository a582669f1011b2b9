"""Who speaks in a scene (memory/scene/routing.py), rule by rule, as a pure function."""

from __future__ import annotations

import random

from memory.scene.routing import Castmember, Heard, addressed, first_speakers, next_speaker

KOLDO = Castmember("koldo", ("Koldo Arrieta", "Koldo"), 0.2)
MAGGIE = Castmember("maggie", ("Maggie Thornton", "Maggie", "the keeper"), 0.5)
ITZIAR = Castmember("itziar", ("Itziar Goikoetxea", "Itziar", "la tabernera"), 0.9)
CAST = [KOLDO, MAGGIE, ITZIAR]


def test_names_are_whole_words_in_any_case_and_accent() -> None:
    assert addressed([Heard("oye KOLDÓ, ¿y la tabernera?")], CAST) == ["koldo", "itziar"]
    assert addressed([Heard("Koldovic no es nadie de aquí")], CAST) == []
    assert addressed([Heard("Maggie y Koldo")], CAST) == ["maggie", "koldo"]  # as they appear


def test_a_reply_comes_first_then_the_names_of_each_message_in_order() -> None:
    heard = [Heard("¿qué dices?", replied_to="itziar"), Heard("Koldo, tú también")]
    assert addressed(heard, CAST) == ["itziar", "koldo"]
    assert addressed([Heard("hola", replied_to="nadie")], CAST) == []  # not present


def test_the_cap_bounds_the_named_and_nobody_named_gets_one() -> None:
    rng = random.Random(3)
    assert first_speakers([Heard("Koldo, Maggie, Itziar")], CAST, None, rng, 2) == [
        "koldo",
        "maggie",
    ]
    assert first_speakers([Heard("hola")], CAST, "maggie", rng, 2) == ["maggie"]  # last partner
    assert first_speakers([Heard("hola")], CAST, "gone", rng, 2) != []  # left: a choice


def test_nobody_named_is_weighted_by_talkativeness_and_seeded() -> None:
    picks = [
        first_speakers([Heard("hola")], CAST, None, random.Random(s), 2)[0] for s in range(400)
    ]
    assert picks.count("itziar") > picks.count("maggie") > picks.count("koldo") > 0
    again = [
        first_speakers([Heard("hola")], CAST, None, random.Random(s), 2)[0] for s in range(400)
    ]
    assert picks == again


def test_a_character_hands_the_word_to_one_who_has_not_spoken_never_back() -> None:
    assert next_speaker("Pregúntale a Itziar", "koldo", CAST, ["koldo"]) == "itziar"
    assert next_speaker("Koldo, no me líes", "itziar", CAST, ["koldo", "itziar"]) is None
    assert next_speaker("Yo, Koldo, lo digo", "koldo", CAST, ["koldo"]) is None  # itself


def test_names_and_aliases_of_three_letters_route() -> None:
    ane = Castmember("ane", ("Ane Etxeberria", "Ane", "Txo"))
    cast = [KOLDO, ane]
    assert addressed([Heard("Ane, ¿vienes?")], cast) == ["ane"]  # a first name of three
    assert addressed([Heard("oye, txo: ¿y tú?")], cast) == ["ane"]  # an alias of three
    assert first_speakers([Heard("¿Qué opinas, Ane?")], cast, "koldo", random.Random(1), 2) == [
        "ane"
    ]
    assert next_speaker("Pregúntale a Txo", "koldo", cast, ["koldo"]) == "ane"
    # Still whole words, whichever place a name has among the character's names.
    assert addressed([Heard("Anexo al informe")], cast) == []
    assert addressed([Heard("Mane lo dijo en Etxoa")], cast) == []
