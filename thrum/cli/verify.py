"""``thrum verify``: check a range of ``a-sync`` as every replica would (pre-receive hooks, CI)."""

from __future__ import annotations

import sys

import click

from .common import CONTEXT_SETTINGS, global_options, runtime


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option("--from", "old", metavar="OLD", help="Commit the range starts after (default: nothing; all zeros too).")
@click.option("--to", "new", metavar="NEW", help="Commit the range ends at (default: the a-sync branch).")
@global_options()
def verify(old, new):
    """Check what a push of a-sync adds and removes, as every replica would judge it.

    Exits 1 with one line per bad line (`path:line: kind: reason`) when the range adds
    anything a replica would quarantine (malformed, forged, unsigned, bad signature,
    unknown signer, foreign log, dated ahead, key conflict, not admitted, not
    authorized, revoked), forks or skips positions of a writer's chain, or removes
    lines. The team's rules come from the team root (thrum-team.toml on the normal
    branch, when there is one) and from the facts already in OLD (registrations,
    admissions, rotations, revocations, group creations).

    Pre-receive hook (self-hosted server, in the bare repository's hooks/pre-receive):

    \b
      #!/bin/sh
      while read old new ref; do
        [ "$ref" = refs/heads/a-sync ] || continue
        thrum verify --repo . --from "$old" --to "$new" || exit 1
      done
    """
    rt = runtime()
    repo_path = rt.opts.repo or "."  # the global --repo: bare repositories too (the remote's side)
    from ..sync.verifyrange import committed_root, open_repository, verify_range

    repo = open_repository(repo_path)  # SyncError (a ThrumError): one line, exit 1
    root = committed_root(repo_path)
    result = verify_range(repo, old, new, root=root)
    if rt.opts.json:
        rt.emit(result.to_json(), None)
    else:
        for finding in result.findings:
            click.echo(finding.text())
        summary = (
            f"thrum verify: {result.added} line(s) added, {result.removed} removed in {result.files} file(s); "
            f"{len(result.findings)} bad ({result.seconds:.2f} s)"
        )
        click.echo(summary, err=True)
    if not result.ok:
        sys.exit(1)
