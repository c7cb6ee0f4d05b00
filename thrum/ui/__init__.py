"""The Web UI: a page served by the daemon that talks to the daemon's WebSocket RPC.

`access` (who may use it), `http` (a small HTTP/1.1 server on trio + h11),
`app` (the routes), `hook` (what the daemon holds: the access rules and the
listener that the ``ui.open`` RPC method, thrum/daemon/service/ui.py, starts) and
`static/` (the page: plain HTML, CSS and JavaScript modules, no build step).
Nothing here imports the daemon (tests/test_architecture.py). See docs/design/ui.md.
"""
