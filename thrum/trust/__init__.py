"""Authorship on a shared log: keys, signatures, seals, and what a replica accepts.

The remote is untrusted (docs/design/trust.md). Every event thrum writes is signed
by its author with Ed25519; a replica applies a line only when it verifies against
the key it first learned for that author (trust on first use). Modules:

- `keys`: key pairs, the private key files beside identities, key tags;
- `signing`: canonical bytes, signatures, line hashes, seals, bound message ids;
- `ring`: the keys this replica trusts (local identities, then first-seen keys);
- `verify`: the verdict on a batch of lines (pure over a ring).

Nothing here imports trio or pygit2; only `keys` and `ring` touch files.
"""
