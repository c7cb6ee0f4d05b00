"""WebSocket transport (placeholder until the real-time work lands)."""

import trio


async def serve_ws(daemon, task_status=trio.TASK_STATUS_IGNORED):
    task_status.started(None)
