"""The one error type whose message is safe to show to an end user."""


class UserFacingError(Exception):
    """An expected failure with a message written for the person chatting.

    Adapters map it to a reply in one error handler per platform; anything else is logged
    with its traceback and answered with a generic apology.

    ``code`` (with ``values``) names the message in the bot's catalogue (bot/texts.py), which
    words it in the user's language; ``message`` is then the English wording for logs and the
    command line, where no user language applies.
    """

    def __init__(self, message: str, *, code: str | None = None, **values: object) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.values = values
