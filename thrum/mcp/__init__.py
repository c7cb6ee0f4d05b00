"""The MCP server (`thrum mcp serve`): tools for agents in MCP hosts, push wake-ups.

Modules: `server` (start-up, stdio), `tools` (the 13 tools), `models` (their typed
outputs), `convert` (addresses in; replies as the models, errors as one line),
`presence` (agent and recipient status), `waiter` (subscription, queue,
wait_for_message), `link` (the daemon connection), `hostconfig` (`thrum mcp config`).
"""
