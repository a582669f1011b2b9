"""The operator's and community admins' wording: access rules, budgets and canon review, in
Spanish and English. Part of the one message catalogue (bot/texts.py merges it into TEXTS);
kept apart so the catalogue of what every user reads stays short."""

from __future__ import annotations

ADMIN_TEXTS: dict[str, dict[str, str]] = {
    "es": {
        # Out of budget (bot/budgets.py budget_line): whose limit, and when it resets.
        "budget_out": "Has llegado al límite de uso {what}; podrás seguir hablando a partir "
        "del {when}.",
        "budget_out_person": "de tu cuenta",
        "budget_out_community": "de este grupo",
        "budget_out_global": "del bot",
        # Who may talk (bot/access.py): one line, at most once a day, in a private chat.
        "access_blocked": "No puedo hablar contigo. /memoria sigue a tu disposición.",
        "access_dms_off": "No contesto por privado; búscame en un grupo o servidor. /memoria "
        "sigue a tu disposición.",
        "access_invite_only": "Solo hablo con quien está invitado. /yo te da tu id para "
        "pedirlo; /memoria sigue a tu disposición.",
        "access_changed": "Hecho.",
        "access_unchanged": "Ya estaba así.",
        "canon_private_only": "Las propuestas de canon se revisan en un chat privado conmigo: "
        "citan lo que los personajes dijeron en conversaciones de otras personas.",
        "canon_none": "No hay propuestas de canon pendientes.",
        "canon_more": "… y {count} más: aparecerán al decidir estas.",
        "canon_title": "Propuestas de canon pendientes ({count}):",
        "canon_hint": "/admin canon aprobar ID [ficha|lore] la escribe (ficha: del personaje; "
        "lore: de su mundo); /admin canon rechazar ID la descarta.",
        "canon_status_pending": "pendiente",
        "canon_status_approved": "aprobada",
        "canon_status_rejected": "rechazada",
        "canon_mark": "⚠ Contradice la ficha: {sheet}",
        "canon_line": "  turno {turn} ({when}): {text}",
        "canon_no_evidence": "  (ya no queda ninguna línea: un olvido las borró)",
        "canon_approved_sheet": "Aprobada #{id}: escrita al final de la descripción de la ficha.",
        "canon_approved_lore": "Aprobada #{id}: escrita en la página de lore «canon».",
        "canon_rejected": "Rechazada #{id}: no se escribe nada.",
        "canon_unknown": "No hay ninguna propuesta de canon #{id} (/admin canon las lista).",
        "canon_already_approved": "La propuesta #{id} ya estaba aprobada ({when} UTC).",
        "canon_already_rejected": "La propuesta #{id} ya estaba rechazada ({when} UTC).",
        "canon_contradicts": "La propuesta #{id} contradice la ficha ({sheet}): la ficha diría "
        "las dos cosas. Corrige la ficha a mano y recházala, o apruébala con "
        "`companion characters approve {id} --force`.",
        "canon_not_written": "La propuesta #{id} no se ha escrito y nada ha cambiado: {reason}",
        "canon_no_character": "La propuesta #{id} es de «{character}», que ahora no tiene un "
        "fichero válido: arréglalo o recházala.",
    },
    "en": {
        # Out of budget (bot/budgets.py budget_line): whose limit, and when it resets.
        "budget_out": "You have reached the {what} usage limit; you can keep talking from {when}.",
        "budget_out_person": "of your account",
        "budget_out_community": "of this group",
        "budget_out_global": "of the bot",
        # Who may talk (bot/access.py): one line, at most once a day, in a private chat.
        "access_blocked": "I can't talk with you. /memory is still yours to use.",
        "access_dms_off": "I don't answer private messages; find me in a group or server. "
        "/memory is still yours to use.",
        "access_invite_only": "I only talk with people who are invited. /whoami gives your id "
        "to ask for it; /memory is still yours to use.",
        "access_changed": "Done.",
        "access_unchanged": "It was already so.",
        "canon_private_only": "Canon proposals are reviewed in a private chat with me: they "
        "quote what characters said in other people's conversations.",
        "canon_none": "No canon proposals are waiting.",
        "canon_more": "… and {count} more: they show once these are decided.",
        "canon_title": "Canon proposals waiting ({count}):",
        "canon_hint": "/admin canon approve ID [sheet|lore] writes one (sheet: about the "
        "character; lore: about its world); /admin canon reject ID drops it.",
        "canon_status_pending": "pending",
        "canon_status_approved": "approved",
        "canon_status_rejected": "rejected",
        "canon_mark": "⚠ Contradicts the sheet: {sheet}",
        "canon_line": "  turn {turn} ({when}): {text}",
        "canon_no_evidence": "  (no line is left: a forget removed them)",
        "canon_approved_sheet": "Approved #{id}: written at the end of the sheet's description.",
        "canon_approved_lore": "Approved #{id}: written on the lore page 'canon'.",
        "canon_rejected": "Rejected #{id}: nothing is written.",
        "canon_unknown": "There is no canon proposal #{id} (/admin canon lists them).",
        "canon_already_approved": "Proposal #{id} was already approved ({when} UTC).",
        "canon_already_rejected": "Proposal #{id} was already rejected ({when} UTC).",
        "canon_contradicts": "Proposal #{id} contradicts the sheet ({sheet}): the sheet would "
        "say both. Fix the sheet by hand and reject it, or approve it with "
        "`companion characters approve {id} --force`.",
        "canon_not_written": "Proposal #{id} was not written and nothing changed: {reason}",
        "canon_no_character": "Proposal #{id} is about '{character}', which has no valid file "
        "now: fix it or reject the proposal.",
    },
}
