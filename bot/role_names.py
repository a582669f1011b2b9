"""The process roles of `companion run --role`, apart from bot/roles.py: the command line's
parser needs the names, not the platforms' libraries that running a role imports."""

ROLES = ("all", "platform", "worker")
