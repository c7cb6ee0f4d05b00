"""RPC services, one module per namespace; importing this registers every method."""

from . import admin, agents, doctor, groups, mailboxes, messages, sessions, subscriptions, sync, ui  # noqa: F401
