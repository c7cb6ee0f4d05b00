"""RPC services, one module per namespace (message.* in three: writes, reads, marks).

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
    sessions,
    subscriptions,
    sync,
    ui,
    wake,
)
