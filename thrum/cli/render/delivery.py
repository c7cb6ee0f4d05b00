"""Delivery states as text: who a message reached, how far, and its ack (pure).

Used by ``thrum message get`` and ``thrum sent`` (docs/design/delivery.md). Each
recipient shows its highest state (sent, delivered, surfaced, read, acked) and
when it got there; a message that asked for an ack says whether it is due or overdue.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from .text import at, clean, duration, parse_time, relative_time

STATES = ("delivered", "surfaced", "read", "acked")


def ack_text(ack: Any, now: datetime | None = None) -> str:
    """``requested``, ``requested, due in 10m`` / ``OVERDUE since 3m ago``; '' when none was asked for."""
    if not isinstance(ack, dict):
        return ""
    due = ack.get("due")
    if not due:
        return "requested"
    if ack.get("overdue"):
        return f"requested, OVERDUE (due {relative_time(due, now)})"
    when = parse_time(due)
    if when is None:
        return f"requested, due {clean(due)}"
    left = (when - (now or datetime.now(timezone.utc))).total_seconds()
    return f"requested, due in {duration(max(left, 0))}"


def recipient_line(r: dict[str, Any], now: datetime | None = None) -> str:
    """``@bob  surfaced 2m ago  (delivered 5m ago, surfaced 2m ago)``."""
    state = clean(r.get("state") or "sent")
    when = f" {relative_time(r['at'], now)}" if r.get("at") else ""
    steps = [f"{s} {relative_time(r[f'{s}_at'], now)}" for s in STATES if r.get(f"{s}_at") and s != r.get("state")]
    return f"{at(clean(r.get('agent') or '?'))}  {state}{when}" + (f"  ({', '.join(steps)})" if steps else "")


def delivery_lines(msg: dict[str, Any], now: datetime | None = None) -> list[str]:
    """The ``Ack:`` and ``Delivery:`` part of ``thrum message get`` (none when there is nothing to say)."""
    lines = []
    ack = ack_text(msg.get("ack"), now)
    if ack:
        lines.append(f"Ack: {ack}")
    recipients = [r for r in msg.get("delivery") or [] if isinstance(r, dict)]
    if recipients:
        lines.append("Delivery:")
        lines += ["  " + recipient_line(r, now) for r in recipients]
    return lines


def delivery_summary(msg: dict[str, Any]) -> str:
    """One line for ``thrum sent``: ``Delivery: @bob acked, @carol surfaced · ack OVERDUE``."""
    recipients = [r for r in msg.get("delivery") or [] if isinstance(r, dict)]
    parts = [f"{at(clean(r.get('agent') or '?'))} {clean(r.get('state') or 'sent')}" for r in recipients]
    text = "Delivery: " + (", ".join(parts) if parts else "no recipients")
    ack = msg.get("ack")
    if isinstance(ack, dict):
        text += " · ack " + ("OVERDUE" if ack.get("overdue") else "requested")
    return text
