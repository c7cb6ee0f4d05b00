"""Gas City's exec mail provider on thrum (`thrum-gc-mail`, `thrum gc-mail`).

Kept empty on purpose: Gas City starts the provider for every mail operation, so
importing the package must cost nothing (see `thrum.gcmail.main`).
"""
