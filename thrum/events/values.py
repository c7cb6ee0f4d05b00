"""Closed vocabularies and size limits of event fields.

Plain constants, no imports: front ends that offer the same choices (the CLI's
``--priority``) take them from here without paying for the rest of the package.
"""

from __future__ import annotations

EVENT_VERSION = 1

FORMATS = ("markdown", "plain", "json")
PRIORITIES = ("low", "normal", "high", "critical")
END_REASONS = ("normal", "crash")
CLEANUP_METHODS = ("manual", "automated", "ui")
AGENT_KINDS = ("agent", "user")
MEMBER_TYPES = ("agent", "role")

MAX_CONTENT_BYTES = 16 * 1024 * 1024  # hard cap for log input; the RPC limit is lower and configurable
MAX_LINE_BYTES = 20 * 1024 * 1024
MAX_SUBJECT_CHARS = 4096  # message.create's optional subject line
MAX_REFS = 256
MAX_IDS = 10_000
MAX_ACK_WITHIN = 30 * 24 * 3600  # seconds: the longest ack deadline a message may ask for
MAX_VIA_CHARS = 80  # message.surfaced's ``via``: which hook or tool put the text in the agent's context
