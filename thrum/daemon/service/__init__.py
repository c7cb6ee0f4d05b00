"""RPC services, one module per namespace (message.* in four: writes, reads, marks, search).

Importing this registers every method.
"""

from . import (  # noqa: F401
    admin,
    agents,
    delivery,
    doctor,
    groups,
    mailboxes,
    message_queries,
    messages,
    receipts,
    search,
    sessions,
    subscriptions,
    sync,
    team,
    ui,
    wake,
)
