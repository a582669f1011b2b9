"""The one error type whose message is safe to show to an end user."""


class UserFacingError(Exception):
    """An expected failure with a message written for the person chatting.

    Adapters map it to a reply in one error handler per platform; anything else is logged
    with its traceback and answered with a generic apology.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
