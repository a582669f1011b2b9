"""A group's scenes in words: /escena, the story of a scene, ratings in groups, in Spanish and
English. Part of the one message catalogue (bot/texts.py merges it into TEXTS)."""

from __future__ import annotations

SCENE_TEXTS: dict[str, dict[str, str]] = {
    "es": {
        "mature_discord": "{name} es un personaje para adultos: solo habla en canales con "
        "restricción de edad.",
        "mature_telegram": "{name} es un personaje para adultos: solo habla en grupos que sus "
        "administradores han marcado con /escena madura on.",
        "mature_dm": "{name} es un personaje para adultos y el operador del bot no los permite "
        "por privado.",
        "mature_fallback": "Para los administradores: este canal está vinculado a {name}, pero "
        "{reason} Mientras tanto contesta {fallback}.",
        "scene_mature_on": "Este grupo queda marcado para adultos: los personajes para adultos "
        "pueden hablar aquí.",
        "scene_mature_off": "Este grupo ya no está marcado para adultos: los personajes para "
        "adultos no hablan aquí.",
        "scene_mature_discord": "En Discord lo decide el propio canal: márcalo con restricción de "
        "edad en sus ajustes para que hablen los personajes para adultos.",
        "scene_cast": "En esta escena: {names}.",
        "scene_groups_only": "Las escenas son de los grupos: aquí hablas con un solo personaje.",
        "scene_joined": "{name} entra en la escena. No sabe nada de lo dicho antes de llegar.",
        "scene_already": "{name} ya está en la escena.",
        "scene_absent": "{name} no está en esta escena.",
        "scene_gone": "{name} ya no está en esta escena; /escena dice quién está.",
        "scene_last": "{name} es el único personaje de la escena: añade otro antes de quitarlo.",
        "scene_story_title": "La historia de esta escena según {name}",
        "scene_story_none": "{name} aún no tiene historia de esta escena: se escribe cuando "
        "acaba una conversación del grupo.",
        "scene_left": "{name} sale de la escena; lo que presenció sigue siendo su recuerdo.",
        "scene_switch": "En un grupo hablan los personajes de su escena: /escena los lista.",
        "scene_ask_forget": "¿Borro todo lo tuyo de la escena de este grupo (tus mensajes, en la "
        "memoria de cada personaje, y lo que saben de ti por este grupo)? Lo de los demás no se "
        "toca. Tu memoria por privado tampoco.",
        "scene_forgotten": "Hecho: he borrado tus mensajes de esta escena ({lines} copias) y lo "
        "que sabía de ti en este grupo ({facts} datos). Lo de los demás sigue igual.",
        "story_title": "Nuestra historia, como la cuenta {name}",
        "story_none": "{name} todavía no tiene una historia vuestra: se escribe al terminar "
        "cada conversación privada.",
        "story_deleted": "Hecho: {name} ha borrado vuestra historia.",
        "story_nothing": "No había ninguna historia que borrar.",
        "story_delete_hint": "Para borrarla: /memoria historia borrar",
    },
    "en": {
        "mature_discord": "{name} is a character for adults: they only speak in age-restricted "
        "channels.",
        "mature_telegram": "{name} is a character for adults: they only speak in groups whose "
        "admins marked them with /scene mature on.",
        "mature_dm": "{name} is a character for adults and the bot's operator does not allow "
        "them in private chats.",
        "mature_fallback": "For the admins: this channel is bound to {name}, but {reason} Until "
        "then, {fallback} answers.",
        "scene_mature_on": "This group is now marked for adults: characters for adults may "
        "speak here.",
        "scene_mature_off": "This group is no longer marked for adults: characters for adults "
        "do not speak here.",
        "scene_mature_discord": "On Discord the channel itself decides: mark it age-restricted "
        "in its settings for characters for adults to speak.",
        "scene_cast": "In this scene: {names}.",
        "scene_groups_only": "Scenes are for groups: here you talk with one character.",
        "scene_joined": "{name} joins the scene, knowing nothing said before they came.",
        "scene_already": "{name} is already in the scene.",
        "scene_absent": "{name} is not in this scene.",
        "scene_gone": "{name} is no longer in this scene; /scene lists who is.",
        "scene_last": "{name} is the scene's only character: add another before removing them.",
        "scene_story_title": "The story of this scene as {name} tells it",
        "scene_story_none": "{name} has no story of this scene yet: it is written when one of "
        "the group's conversations ends.",
        "scene_left": "{name} leaves the scene; what they witnessed stays their memory.",
        "scene_switch": "In a group, the scene's characters speak: /scene lists them.",
        "scene_ask_forget": "Delete everything of yours in this group's scene (your messages, in "
        "every character's memory, and what they know of you from this group)? Everyone else's "
        "stays. Your private memory too.",
        "scene_forgotten": "Done: I deleted your messages in this scene ({lines} copies) and what "
        "I knew about you in this group ({facts} facts). Everyone else's stays as it was.",
        "story_title": "Our story, as {name} tells it",
        "story_none": "{name} has no story of you two yet: it is written when each private "
        "conversation ends.",
        "story_deleted": "Done: {name} deleted your story.",
        "story_nothing": "There was no story to delete.",
        "story_delete_hint": "To delete it: /memory story delete",
    },
}
