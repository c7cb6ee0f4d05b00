"""Reaching the agent: host hooks (`main`, `hosts`), their log (`hooklog`), host set-up (`setup`).

A front end like the CLI: it talks to the daemon only through `thrum.client`.
`thrum hook` is a fast entry point (no click), reached from `thrum.cli.entry`.
"""
