"""RPC services, one module per namespace; importing this registers every method."""

from . import admin, agents, groups, messages, sessions, subscriptions, sync, ui  # noqa: F401
