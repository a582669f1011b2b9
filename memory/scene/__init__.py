"""Scenes (issue 31): a group chat as one shared conversation with one or several characters,
each knowing only what it witnessed (see docs/scenes.md)."""
