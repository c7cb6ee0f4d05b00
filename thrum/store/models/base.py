"""The peewee base model every table of the projection derives from.

Models are never bound to a database for queries: they are bound (``bind_ctx``)
only while `thrum.store.database` creates the tables, so the proxy stays unset.
"""

from __future__ import annotations

import peewee as pw

database_proxy = pw.DatabaseProxy()


class Base(pw.Model):
    class Meta:
        database = database_proxy
        legacy_table_names = False
