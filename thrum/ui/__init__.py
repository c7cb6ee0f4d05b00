"""The Web UI: a page served by the daemon that talks to the daemon's WebSocket RPC.

`access` (who may use it), `http` (a small HTTP/1.1 server on trio + h11),
`app` (the routes), `hook` (the ``ui.open`` RPC method and the listener it
starts) and `static/` (the page: plain HTML, CSS and JavaScript modules, no
build step). See docs/design/ui.md.
"""
