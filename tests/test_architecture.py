"""The layers hold: what each part of thrum may import, where SQL and git may appear, how big a room may grow.

docs/design/architecture.md is the map; these tests fail when the code leaves it. Each
rule is a check over a tree (`Tree`): a function returning the offences it finds, and a
test asserting the real tree has none. `test_each_check_fails_on_a_deliberate_break`
breaks every rule on purpose in a copy of the tree and expects its check to name the
break, so no check passes by seeing nothing:

- front ends (cli, mcp, gcmail, hooks, ui) import only the bridge (`client`,
  `client_async`, `lifecycle`, `sync.offline`, `sync.verifyrange`), the core and the
  shared settings modules (`identity`, `paths`, `config`, `envflags`, `ownership`);
- `lifecycle` imports the client and the settings modules at the top, and only
  `sync.worktree`, `sync.transport.credentials` and `daemon.server` lazily;
- RPC services use their narrow context (`call.ctx`), never the daemon itself;
- `thrum.store` and `thrum.sync` import only the core, the settings modules and
  `nofollow` (exceptions stated below), never the daemon, nor each other, not even
  through what they import;
- SQL (execute calls, SQL statements in strings) appears only in `thrum/store/`, and
  pygit2 only in `thrum/sync/`;
- `thrum.sync` is layered: `merge/` is pure, no module imports another back in a
  circle, nothing is re-exported, and nothing outside `sync` imports its `gitstore/`;
- the pure core imports only the standard library, `ulid`, `orjson`, `cryptography`
  and itself: neither trio nor pygit2, directly or through what it imports;
- no module imports another module's private names or reaches into another's
  private attributes;
- no module grows past ~450 lines without a reason written down here, and the lists of
  exceptions name only what still needs one.

The checks read the source (ast), so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from functools import cached_property
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

FRONT_ENDS = ("cli", "mcp", "gcmail", "hooks", "ui")
# The core every layer may import (architecture.md's bottom floor) ...
CORE_PATHS = (
    "thrum/events",
    "thrum/errors.py",
    "thrum/jsonrpc.py",
    "thrum/safejson.py",
    "thrum/framing.py",
    "thrum/trust",
    "thrum/search_query.py",
    "thrum/presence.py",
    "thrum/cli/render",
)
# ... and, with the pure parts of other layers, what must stay free of I/O frameworks.
PURE_CORE = (
    *CORE_PATHS,
    "thrum/sync/merge",
    "thrum/hooks/hosts.py",
    "thrum/hooks/jsonc.py",
)
IMPURE = ("trio", "trio_websocket", "pygit2")
CORE_THIRD_PARTY = ("ulid", "orjson", "cryptography", "msgspec")
# The modules every layer may read its settings and names from.
SETTINGS = ("thrum.identity", "thrum.paths", "thrum.config", "thrum.envflags", "thrum.ownership")
BRIDGE = ("thrum.client", "thrum.client_async", "thrum.lifecycle", "thrum.sync.offline", "thrum.sync.verifyrange")
LIFECYCLE_LAZY = (
    "thrum.sync.worktree",
    "thrum.sync.transport.credentials",
    "thrum.sync.transport.callbacks",
    "thrum.daemon.process",
)
MAX_LINES = 450

# Modules allowed past MAX_LINES, each with its reason. Keep this list short.
LONG_MODULES: dict[str, str] = {
    "thrum/store/log.py": "the one owner of the log's files (issue 28): appending with its undo, replacing "
    "merged segments, reading from positions and reporting them; split, each half would reach into the other",
    "thrum/events/schema.py": "the event schema, one declaration per event type in one place (issue 29: the "
    "schema lives in one declarative place); the pattern checks its __post_init__s share (`_Known`, `_real_day`, "
    "the compiled patterns) are the piece to move out if it grows",
    "thrum/store/verified.py": "the trust check's one way into the projection: judging a batch (the lines that "
    "wait, the facts, the verdict memory) and folding what was judged, two steps so a rebuild can judge ahead "
    "(issue 29); the team facts' part (rejudging, priming, lines written here) is the piece to move out if it grows",
    "thrum/daemon/writer.py": "the single writer: group commit, the append-and-fold with its failure rules (a "
    "write refused alone, a batch cut after a write that retires a key), and the sync thread's side under the "
    "same lock; that side (take_appended, apply_remote, ...) is the piece to move out if it grows",
    "thrum/store/rebuild.py": "a rebuild's whole course in one place (issue 29): the log read here or ahead, "
    "judged here, ahead or by a second process, folded in one transaction, loaded again when a batch cannot be "
    "undone or the second process fails, then finished; the batch loop (`_fold_log` and its protocols) is the "
    "piece to move out if it grows",
}

# Private names imported across modules, each with its reason. Keep this list empty.
PRIVATE_IMPORTS: dict[tuple[str, str], str] = {}

# Private attributes reached into from outside the module that defines them, each with its reason.
PRIVATE_ATTRIBUTES: dict[tuple[str, str], str] = {
    ("thrum/mcp/server.py", "_exit"): "os._exit: the standard library's documented exit without clean-up",
    ("thrum/sync/gitstore/gitlib.py", "_index"): "pygit2 offers no stat-aware index add; libgit2's own call "
    "takes the index pointer pygit2 keeps there",
    ("thrum/sync/gitstore/gitlib.py", "_remote"): "pygit2's Remote.fetch cannot turn FETCH_HEAD off; libgit2's "
    "own call takes the remote pointer pygit2 keeps there (gitlib.fetch_refs)",
}

# Imports by store and sync beyond the core, the settings modules and nofollow, each with its reason.
STORE_SYNC_EXTRA: dict[tuple[str, str], str] = {
    ("thrum.store.mailboxes", "thrum.gcmail.addresses"): "the pure naming rule of a shared mailbox (gcmail owns it)",
}

# Imports by the pure core of thrum modules outside it, each with its reason.
CORE_EXTRA: dict[tuple[str, str], str] = {
    ("thrum.trust.keys", "thrum.ownership"): "a key file is vetted by the one rule for the user's own files; "
    "imported lazily, only when the caller brings no rule of its own",
}

# Who outside `thrum.sync` may import a `thrum.sync.gitstore` module, and why.
GITSTORE_USERS = {
    "thrum.daemon.process": "caps libgit2's process-wide object cache at start-up (bound_object_cache)",
    "thrum.daemon.server": "the composition root takes the sync's git store opener (a test's fake) as an argument",
    "thrum.daemon.syncer": "the sync loop opens its replicator's git store through the opener it was given",
}

SQL_STATEMENT = re.compile(
    r"\b(SELECT\s.+?\sFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|"
    r"CREATE\s+(TABLE|INDEX|TRIGGER|VIEW)|DROP\s+(TABLE|INDEX|VIEW)|PRAGMA\s+\w+)",
    re.S,
)
SQL_CALLS = {"execute", "execute_sql", "executemany", "executescript"}


def _within(module: str, *packages: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


_PARSED: dict[str, ast.Module] = {}  # source -> its tree (a copy's file shares its original's)
_IMPORTS: dict[tuple[int, str], list[tuple[str, list[str], int, bool]]] = {}
_FOUND: dict[tuple[str, int, str], object] = {}  # (check, id of a parsed module, its path) -> what it found


class Tree:
    """One checkout's `thrum/` package, parsed once: its modules, their imports, their graph."""

    def __init__(self, root: Path):
        self.root = root
        self.thrum = root / "thrum"
        self._parsed: dict[Path, ast.Module] = {}

    def modules(self, under: str | Path = "thrum") -> list[Path]:
        base = self.root / under
        if base.is_file():
            return [base]
        return sorted(p for p in base.rglob("*.py") if "__pycache__" not in p.parts)

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def name(self, path: Path) -> str:
        parts = list(path.relative_to(self.root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts)

    def ast(self, path: Path) -> ast.Module:
        if path not in self._parsed:
            text = path.read_text()
            if text not in _PARSED:  # the deliberate breaks re-read a copy of the tree where one file changed
                _PARSED[text] = ast.parse(text, str(path))
            self._parsed[path] = _PARSED[text]
        return self._parsed[path]

    def imports(self, path: Path, name: str | None = None) -> list[tuple[str, list[str], int, bool]]:
        """(absolute module, imported names, line, lazy) for every import, relative ones resolved.

        ``lazy``: inside a function. ``name``: the module's dotted name (default: from its path).
        """
        tree = self.ast(path)
        name = name or self.name(path)
        if (id(tree), name) not in _IMPORTS:
            _IMPORTS[id(tree), name] = self._read_imports(tree, path, name)
        return _IMPORTS[id(tree), name]

    @staticmethod
    def _read_imports(tree: ast.Module, path: Path, name: str) -> list[tuple[str, list[str], int, bool]]:
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        lazy_nodes = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            for inner in ast.walk(node)
        }
        out = []
        for node in ast.walk(tree):
            lazy = id(node) in lazy_nodes
            if isinstance(node, ast.Import):
                out += [(alias.name, [], node.lineno, lazy) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                out.append((module, [alias.name for alias in node.names], node.lineno, lazy))
        return out

    @cached_property
    def names(self) -> dict[str, Path]:
        return {self.name(p): p for p in self.modules()}

    def edges(self, path: Path) -> list[tuple[str, int, bool]]:
        """(thrum module, line, lazy) for each thrum module ``path`` imports: `from pkg import mod`
        imports ``pkg.mod`` when that is a module, else ``pkg``."""
        out = []
        for module, imported, line, lazy in self.imports(path):
            if not _within(module, "thrum"):
                continue
            targets = [f"{module}.{n}" for n in imported if f"{module}.{n}" in self.names]
            out += [(t, line, lazy) for t in targets or [module]]
        return out

    @cached_property
    def graph(self) -> dict[str, set[str]]:
        """thrum module -> the thrum modules it imports (lazy imports too)."""
        return {name: {t for t, _, _ in self.edges(path)} - {name} for name, path in self.names.items()}


HERE = Tree(ROOT)


def _offences(
    tree: Tree, paths: list[Path], banned: tuple[str, ...], allowed: tuple[str, ...] = (), name: str | None = None
) -> list[str]:
    def ok(module: str) -> bool:
        return not _within(module, *banned) or _within(module, *allowed)

    found = []
    for path in paths:
        for module, names, line, _lazy in tree.imports(path, name):
            # `from thrum import daemon` imports thrum.daemon; `from thrum.sync import offline`
            # imports thrum.sync.offline (allowed) although it runs thrum/sync/__init__.py
            targets = [f"{module}.{n}" for n in names]
            bad = [t for t in targets if not ok(t)]
            if not ok(module) and (bad or not targets):
                bad = bad or [module]
            found += [f"{name or tree.rel(path)}:{line} imports {t}" for t in bad]
    return sorted(set(found))


def _reaches(graph: dict[str, set[str]], start: str, banned: str) -> list[str] | None:
    """A chain of imports from ``start`` into package ``banned``, or None."""
    seen, todo = {start: [start]}, [start]
    while todo:
        here = todo.pop()
        for dep in sorted(graph.get(here, ())):
            if dep in seen:
                continue
            chain = seen[here] + [dep]
            if _within(dep, banned):
                return chain
            seen[dep] = chain
            todo.append(dep)
    return None


def _core_names(tree: Tree) -> list[str]:
    return [tree.name(p) for entry in PURE_CORE for p in tree.modules(entry)]


def _dotted(paths: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(entry.removesuffix(".py").replace("/", ".") for entry in paths)


CORE = _dotted(CORE_PATHS)


# --------------------------------------------------------------------------- the checks


def front_ends_import_only_the_bridge(tree: Tree) -> list[str]:
    allowed = (
        *(f"thrum.{f}" for f in FRONT_ENDS),
        *BRIDGE,
        *SETTINGS,
        *CORE,
    )
    found = []
    for f in FRONT_ENDS:
        for path in tree.modules(f"thrum/{f}") if (tree.thrum / f).exists() else []:
            found += [
                f"{tree.rel(path)}:{line} imports {t}"
                for t, line, _ in tree.edges(path)
                if t != "thrum" and not _within(t, *allowed)
            ]
    return sorted(set(found))


def lifecycle_imports_the_daemon_and_sync_only_lazily(tree: Tree) -> list[str]:
    path = tree.thrum / "lifecycle.py"
    top = ("thrum.client", *SETTINGS, *CORE)
    return sorted(
        f"{tree.rel(path)}:{line} imports {t}" + (" (lazily)" if lazy else "")
        for t, line, lazy in tree.edges(path)
        if t != "thrum" and not (_within(t, *top) or (lazy and _within(t, *LIFECYCLE_LAZY)))
    )


def services_use_their_narrow_context(tree: Tree) -> list[str]:
    found = []
    for path in tree.modules("thrum/daemon/service"):
        for node in ast.walk(tree.ast(path)):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("daemon", "store")
                and isinstance(node.value, ast.Name)
                and node.value.id == "call"
            ):
                found.append(f"{tree.rel(path)}:{node.lineno} uses call.{node.attr}")
    return found


def store_and_sync_never_import_the_daemon(tree: Tree) -> list[str]:
    paths = tree.modules("thrum/store") + tree.modules("thrum/sync")
    return _offences(tree, paths, ("thrum.daemon", "thrum.lifecycle", "thrum.cli"))


def store_and_sync_import_only_the_core_and_settings(tree: Tree) -> list[str]:
    found = []
    for own in ("thrum.store", "thrum.sync"):
        allowed = (own, "thrum.nofollow", "thrum.durable", *SETTINGS, *CORE)
        for name, path in tree.names.items():
            if _within(name, own):
                found += [
                    f"{tree.rel(path)}:{line} imports {t}"
                    for t, line, _ in tree.edges(path)
                    if t != "thrum" and not _within(t, *allowed) and (name, t) not in STORE_SYNC_EXTRA
                ]
    return sorted(set(found))


def store_and_sync_never_import_each_other(tree: Tree) -> list[str]:
    """Not even through what they import."""
    found = []
    for name in sorted(tree.graph):
        for own, other in (("thrum.store", "thrum.sync"), ("thrum.sync", "thrum.store")):
            if _within(name, own):
                chain = _reaches(tree.graph, name, other)
                if chain is not None:
                    found.append(" -> ".join(chain))
    return found


def _sql_in(tree: Tree, path: Path, label: str | None = None) -> list[str]:
    module = tree.ast(path)
    label = label or tree.rel(path)
    key = ("sql", id(module), label)
    if key not in _FOUND:  # the deliberate breaks ask again of a tree where one file changed
        _FOUND[key] = _sql_in_module(module, label)
    return _FOUND[key]


def _sql_in_module(module: ast.Module, label: str) -> list[str]:
    docs = set()
    for node in ast.walk(module):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    found = []
    for node in ast.walk(module):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SQL_CALLS:
            found.append((node.lineno, f"{label}:{node.lineno} calls .{node.func.attr}()"))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docs
            and SQL_STATEMENT.search(node.value)
        ):
            found.append((node.lineno, f"{label}:{node.lineno} holds SQL {node.value[:60]!r}"))
    return [text for _, text in sorted(found)]


def sql_appears_only_in_the_store(tree: Tree) -> list[str]:
    return [hit for name, p in tree.names.items() if not _within(name, "thrum.store") for hit in _sql_in(tree, p)]


# Where pygit2 may be imported, and why: every other module reaches git through the git
# store's interface (`thrum.sync.gitstore.api.GitStore`), so it runs on the in-memory fake too.
PYGIT2_HOMES = {
    "thrum.sync.gitstore.libgit2": "the interface's implementation over pygit2",
    "thrum.sync.gitstore.gitlib": "what pygit2 does not wrap (cffi), libgit2's tuning, its pack handles",
    "thrum.sync.gitstore.fetchview": "the repositories libgit2 fetches between: our odb and config with only the "
    "fetch's refs, a path remote's objects with only its a-sync (libgit2 handles put together)",
    "thrum.sync.transport": "libgit2's transport: logins, host keys, one network operation",
}


def git_appears_only_in_the_git_store_and_the_transport(tree: Tree) -> list[str]:
    paths = [p for name, p in tree.names.items() if not any(_within(name, home) for home in PYGIT2_HOMES)]
    return _offences(tree, paths, ("pygit2",))


# The daemon's parts own their attributes (docs/design/architecture.md, "The daemon's parts"):
# in thrum/daemon and thrum/ui an assignment to an attribute is to one of ``self``'s own,
# or to one of the records below, each with its reason. Keep this list short.
COMPONENT_PARTS = ("thrum/daemon", "thrum/ui")
RECORD_WRITES: dict[tuple[str, str], str] = {
    ("thrum/daemon/hub.py", "sub"): "a Subscription: the hub's own record of one subscription and its replay",
    ("thrum/daemon/writer.py", "p"): "a queued write (_Pending): the writer's own record, handed back to its waiter",
    ("thrum/daemon/wakeups.py", "p"): "a Pane: the waker's own record of an agent's tmux pane",
    ("thrum/daemon/wakeups.py", "w"): "a Watch: the waker's own record of a pane's screen",
    ("thrum/daemon/syncer.py", "report"): "a cycle's report (sync.cycle), adjusted for what the fold refused",
    ("thrum/daemon/limits.py", "self.wait_scope"): "a trio CancelScope's deadline (trio's own interface)",
    ("thrum/ui/app.py", "resp"): "an HTTP Response being built (thrum.ui.http's record)",
}


def _attribute_writes(tree: Tree, path: Path, label: str | None = None) -> list[tuple[str, str]]:
    """(what, where) for every assignment to an attribute of something other than ``self``,
    and every reach into another object's underscored name."""
    label = label or tree.rel(path)
    found: list[tuple[int, str, str]] = []
    for node in ast.walk(tree.ast(path)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        flat = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
        for t in flat:
            if isinstance(t, ast.Attribute) and ast.unparse(t.value) not in ("self", "cls"):
                found.append((node.lineno, ast.unparse(t.value), f"{label}:{node.lineno} sets {ast.unparse(t)}"))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" and node.args:
            if ast.unparse(node.args[0]) not in ("self", "cls"):
                found.append(
                    (node.lineno, ast.unparse(node.args[0]), f"{label}:{node.lineno} calls {ast.unparse(node)}")
                )
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and ast.unparse(node.value) not in ("self", "cls")
        ):
            found.append((node.lineno, "", f"{label}:{node.lineno} reaches into {ast.unparse(node)}"))
    return [(base, where) for _, base, where in sorted(found)]


def no_part_of_the_daemon_sets_another_parts_attributes(tree: Tree) -> list[str]:
    """Each part gets what it uses through its constructor: nobody plants attributes on
    another (`daemon.hub = ...`) or reaches into its underscored names."""
    found = []
    for entry in COMPONENT_PARTS:
        for path in tree.modules(entry):
            found += [w for base, w in _attribute_writes(tree, path) if (tree.rel(path), base) not in RECORD_WRITES]
    return found


def sync_modules_import_no_circle(tree: Tree) -> list[str]:
    graph = {
        n: {d for d in deps if _within(d, "thrum.sync")} for n, deps in tree.graph.items() if _within(n, "thrum.sync")
    }
    circles = []
    for name in sorted(graph):
        for dep in graph[name]:
            back = _reaches(graph, dep, name)
            if back is not None and back[-1] == name:
                circles.append(" -> ".join([name, *back]))
    return circles


def _defined_names(module: ast.Module) -> set[str]:
    out = set()
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out.update(t.id for t in targets if isinstance(t, ast.Name))
    return out


def sync_re_exports_nothing(tree: Tree) -> list[str]:
    """Every name in a sync module's ``__all__`` is defined there, and a package's
    ``__init__`` imports none of its modules: callers import from the module that defines
    a name, so a move breaks loudly instead of living on behind an old path. (The store
    keeps `projection` and `queries` as its deliberate entry points.)"""
    found = []
    for path in tree.modules("thrum/sync"):
        module = tree.ast(path)
        exported: list[str] = []
        for node in module.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                if isinstance(node.value, (ast.List, ast.Tuple)):
                    exported = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
        defined = _defined_names(module)
        found += [f"{tree.rel(path)} exports {n}, defined elsewhere" for n in exported if n not in defined]
        if path.name == "__init__.py":
            package = tree.name(path)
            found += [
                f"{tree.rel(path)}:{line} imports {module}"
                for module, _names, line, _lazy in tree.imports(path)
                if _within(module, package) and module != package
            ]
    return found


def nothing_outside_sync_imports_the_gitstore(tree: Tree) -> list[str]:
    """The git store is sync's own: the rest of thrum reaches git through the cycle's
    modules, so the store can change (or be faked) without touching a caller."""
    found = []
    for name, path in tree.names.items():
        if not _within(name, "thrum.sync") and name not in GITSTORE_USERS:
            found += _offences(tree, [path], ("thrum.sync.gitstore",))
    return found


def the_core_imports_only_the_standard_library_and_its_own(tree: Tree) -> list[str]:
    """Third-party: only ulid, orjson, cryptography, msgspec (so never trio nor pygit2); of thrum: only the core."""
    found = []
    core = _dotted(PURE_CORE)
    for entry in PURE_CORE:
        for path in tree.modules(entry):
            name = tree.name(path)
            for module, _names, line, _lazy in tree.imports(path):
                top = module.split(".")[0]
                if top in sys.stdlib_module_names or top in ("__future__", "thrum") or top in CORE_THIRD_PARTY:
                    continue
                found.append(f"{tree.rel(path)}:{line} imports {module}")
            found += [
                f"{tree.rel(path)}:{line} imports {t}"
                for t, line, _ in tree.edges(path)
                if t != "thrum" and not _within(t, *core) and (name, t) not in CORE_EXTRA
            ]
    return sorted(set(found))


def the_core_pulls_in_neither_trio_nor_pygit2(tree: Tree) -> list[str]:
    """Importing every core module (in a fresh interpreter) loads neither, through whatever it imports."""
    code = (
        "import importlib, sys\n"
        f"for name in {_core_names(tree)!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(sorted(m for m in {IMPURE!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tree.root)
    loaded = out.stdout.strip()
    return [] if loaded == "[]" else [f"importing the core loads {loaded}"]


def _private_imports(tree: Tree) -> dict[tuple[str, str], str]:
    """(importing file, private name) -> where, for every import of another thrum module's private name."""
    found = {}
    for name, path in tree.names.items():
        for module, names, line, _lazy in tree.imports(path):
            if not _within(module, "thrum") or module == name:
                continue
            for imported in names:
                if imported.startswith("_") and not imported.startswith("__"):
                    found[(tree.rel(path), imported)] = f"{tree.rel(path)}:{line} imports {module}.{imported}"
    return found


def no_module_imports_another_modules_private_names(tree: Tree) -> list[str]:
    return [where for key, where in sorted(_private_imports(tree).items()) if key not in PRIVATE_IMPORTS]


def _private_attributes(tree: Tree) -> dict[tuple[str, str], str]:
    """(file, attribute) -> where, for each `x._name` whose `_name` the file itself never defines
    (no def, class, assignment, argument or string of that name): another module's private state."""
    found = {}
    for path in tree.modules():
        module = tree.ast(path)
        key = ("private", id(module), tree.rel(path))
        if key not in _FOUND:  # the deliberate breaks ask again of a tree where one file changed
            _FOUND[key] = _private_attributes_of(module, tree.rel(path))
        found.update(_FOUND[key])
    return found


def _private_attributes_of(module: ast.Module, rel: str) -> dict[tuple[str, str], str]:
    found = {}
    own = set()
    for node in ast.walk(module):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            own.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.arg):
            own.add(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            own.add(node.value)
    for node in ast.walk(module):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and node.attr not in own
        ):
            found[(rel, node.attr)] = f"{rel}:{node.lineno} reaches into {ast.unparse(node)}"
    return found


def no_module_reaches_into_another_modules_private_attributes(tree: Tree) -> list[str]:
    return [where for key, where in sorted(_private_attributes(tree).items()) if key not in PRIVATE_ATTRIBUTES]


def _sizes(tree: Tree) -> dict[str, int]:
    return {tree.rel(p): len(p.read_text().splitlines()) for p in tree.modules()}


def no_module_is_too_big_without_a_stated_reason(tree: Tree) -> list[str]:
    return [f"{path}: {n} lines" for path, n in _sizes(tree).items() if n > MAX_LINES and path not in LONG_MODULES]


CHECKS = [
    front_ends_import_only_the_bridge,
    lifecycle_imports_the_daemon_and_sync_only_lazily,
    services_use_their_narrow_context,
    store_and_sync_never_import_the_daemon,
    store_and_sync_import_only_the_core_and_settings,
    store_and_sync_never_import_each_other,
    sql_appears_only_in_the_store,
    git_appears_only_in_the_git_store_and_the_transport,
    no_part_of_the_daemon_sets_another_parts_attributes,
    sync_modules_import_no_circle,
    sync_re_exports_nothing,
    nothing_outside_sync_imports_the_gitstore,
    the_core_imports_only_the_standard_library_and_its_own,
    the_core_pulls_in_neither_trio_nor_pygit2,
    no_module_imports_another_modules_private_names,
    no_module_reaches_into_another_modules_private_attributes,
    no_module_is_too_big_without_a_stated_reason,
]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_the_tree_keeps_the_rule(check):
    assert check(HERE) == []


# --------------------------------------------------------------------------- the checks' own tests


def test_the_import_checker_sees_lazy_and_relative_imports(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os\ndef f():\n    from ..daemon import launcher\n    from .. import daemon\n    from . import render\n"
    )
    assert _offences(Tree(tmp_path), [probe], ("thrum.daemon",), name="thrum.cli.probe") == [
        "thrum.cli.probe:3 imports thrum.daemon.launcher",
        "thrum.cli.probe:4 imports thrum.daemon",
    ]
    assert [lazy for *_, lazy in Tree(tmp_path).imports(probe, "thrum.cli.probe")] == [False, True, True, True]


def test_the_attribute_checker_sees_planted_parts_and_private_reaches(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def plant(daemon, hub, x):\n    daemon.hub = hub\n    daemon.registry.served = hub.served\n"
        "    setattr(daemon, 'web_ui', x)\n    hub._matches(x)\n    x.count += 1\n"
        "class Own:\n    def __init__(self):\n        self.a = 1\n        self._b = self._c\n"
    )
    assert [where for _, where in _attribute_writes(Tree(tmp_path), probe, "p")] == [
        "p:2 sets daemon.hub",
        "p:3 sets daemon.registry.served",
        "p:4 calls setattr(daemon, 'web_ui', x)",
        "p:5 reaches into hub._matches",
        "p:6 sets x.count",
    ]


def test_the_sql_checker_finds_calls_and_statements(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""SELECT x FROM docs is fine."""\n'
        'def f(db, t):\n    db.execute_sql("SELECT a FROM b")\n    return f"DELETE FROM {t}"\n'
    )
    assert _sql_in(Tree(tmp_path), sample, "s") == [
        "s:3 calls .execute_sql()",
        "s:3 holds SQL 'SELECT a FROM b'",
        "s:4 holds SQL 'DELETE FROM '",
    ]


def test_the_exception_lists_name_only_what_still_needs_an_exception():
    sizes = _sizes(HERE)
    assert [path for path in LONG_MODULES if sizes.get(path, 0) <= MAX_LINES] == [], "no longer long: drop them"
    assert [key for key in PRIVATE_IMPORTS if key not in _private_imports(HERE)] == [], "no longer imported: drop them"
    assert [key for key in PRIVATE_ATTRIBUTES if key not in _private_attributes(HERE)] == [], "no longer used"
    edges = {(name, t) for name, path in HERE.names.items() for t, _, _ in HERE.edges(path)}
    assert [key for key in STORE_SYNC_EXTRA if key not in edges] == [], "no longer imported: drop them"
    assert [key for key in CORE_EXTRA if key not in edges] == [], "no longer imported: drop them"
    made = {
        (HERE.rel(p), base) for e in COMPONENT_PARTS for p in HERE.modules(e) for base, _ in _attribute_writes(HERE, p)
    }
    assert [key for key in RECORD_WRITES if key not in made] == [], "no longer written: drop them"
    for home in PYGIT2_HOMES:
        homes = [p for name, p in HERE.names.items() if _within(name, home)]
        assert _offences(HERE, homes, ("pygit2",)), f"{home} no longer imports pygit2: drop it from PYGIT2_HOMES"
    for name in GITSTORE_USERS:
        assert _within(name, "thrum") and any(_within(t, "thrum.sync.gitstore") for t in HERE.graph.get(name, ())), (
            f"{name} no longer imports the git store"
        )


# Each rule broken on purpose: (check, file under the copy, code appended to it). A file
# that does not exist is created (a new module).
BREAKS = [
    (front_ends_import_only_the_bridge, "thrum/cli/sync.py", "\nfrom ..store import log as _log  # injected\n"),
    (front_ends_import_only_the_bridge, "thrum/mcp/link.py", "\ndef _f():\n    from ..daemon import hub  # noqa\n"),
    (front_ends_import_only_the_bridge, "thrum/hooks/main.py", "\nfrom ..sync import replicate  # injected\n"),
    (front_ends_import_only_the_bridge, "thrum/gcmail/provider.py", "\nfrom .. import nofollow  # injected\n"),
    (lifecycle_imports_the_daemon_and_sync_only_lazily, "thrum/lifecycle.py", "\nfrom .daemon import server\n"),
    (
        lifecycle_imports_the_daemon_and_sync_only_lazily,
        "thrum/lifecycle.py",
        "\ndef _f():\n    from .store import log  # noqa\n",
    ),
    (services_use_their_narrow_context, "thrum/daemon/service/agents.py", "\ndef _f(call):\n    call.daemon\n"),
    (store_and_sync_never_import_the_daemon, "thrum/store/fold.py", "\ndef _f():\n    from ..daemon import hub\n"),
    (store_and_sync_never_import_the_daemon, "thrum/sync/cycle.py", "\nfrom .. import lifecycle  # injected\n"),
    (store_and_sync_import_only_the_core_and_settings, "thrum/store/fold.py", "\nfrom .. import client  # noqa\n"),
    (store_and_sync_never_import_each_other, "thrum/sync/cycle.py", "\nfrom ..store import log  # injected\n"),
    (store_and_sync_never_import_each_other, "thrum/store/log.py", "\nfrom ..sync import state  # injected\n"),
    # indirectly: store -> nofollow -> sync
    (store_and_sync_never_import_each_other, "thrum/nofollow.py", "\ndef _f():\n    from .sync import state\n"),
    (sql_appears_only_in_the_store, "thrum/cli/inbox.py", '\n_Q = "SELECT id FROM messages"\n'),
    (sql_appears_only_in_the_store, "thrum/daemon/writer.py", "\ndef _f(db):\n    db.execute_sql('x')\n"),
    (git_appears_only_in_the_git_store_and_the_transport, "thrum/store/log.py", "\nimport pygit2  # injected\n"),
    (git_appears_only_in_the_git_store_and_the_transport, "thrum/daemon/syncer.py", "\ndef _f():\n    import pygit2\n"),
    (git_appears_only_in_the_git_store_and_the_transport, "thrum/sync/cycle.py", "\ndef _f():\n    import pygit2\n"),
    (no_part_of_the_daemon_sets_another_parts_attributes, "thrum/daemon/server.py", "\ndef _f(d, h):\n    d.hub = h\n"),
    (no_part_of_the_daemon_sets_another_parts_attributes, "thrum/ui/app.py", "\ndef _f(d):\n    setattr(d, 'x', 1)\n"),
    (sync_modules_import_no_circle, "thrum/sync/gitstore/gitlib.py", "\ndef _f():\n    from ..replicate import x\n"),
    (sync_re_exports_nothing, "thrum/sync/state.py", "\n__all__ = ['ThrumError']\n"),
    (sync_re_exports_nothing, "thrum/sync/gitstore/__init__.py", "\nfrom .gitlib import *  # noqa\n"),
    (
        nothing_outside_sync_imports_the_gitstore,
        "thrum/cli/sync.py",
        "\ndef _f():\n    from ..sync.gitstore import x\n",
    ),
    (nothing_outside_sync_imports_the_gitstore, "thrum/daemon/hub.py", "\nfrom ..sync.gitstore import objbatch\n"),
    (the_core_imports_only_the_standard_library_and_its_own, "thrum/sync/merge/shard.py", "\nimport pygit2\n"),
    (the_core_imports_only_the_standard_library_and_its_own, "thrum/trust/keys.py", "\ndef _f():\n    import trio\n"),
    (the_core_imports_only_the_standard_library_and_its_own, "thrum/errors.py", "\nimport click  # injected\n"),
    (the_core_imports_only_the_standard_library_and_its_own, "thrum/safejson.py", "\nfrom . import paths  # x\n"),
    # through what it imports (also a break of the rule above, which reads the source only)
    (the_core_pulls_in_neither_trio_nor_pygit2, "thrum/framing.py", "\nfrom .daemon import hub  # injected\n"),
    (no_module_imports_another_modules_private_names, "thrum/cli/send.py", "\nfrom ..paths import _x  # noqa\n"),
    (
        no_module_reaches_into_another_modules_private_attributes,
        "thrum/daemon/syncer.py",
        "\n_f = lambda w: w._readers\n",
    ),
    (
        no_module_reaches_into_another_modules_private_attributes,
        "thrum/daemon/dispatch.py",
        "\n_g = lambda c: c._daemon\n",
    ),
    (no_module_is_too_big_without_a_stated_reason, "thrum/paths.py", "\n" + "x = 1\n" * MAX_LINES),
]


def test_every_check_has_a_deliberate_break():
    assert {c.__name__ for c in CHECKS} == {c.__name__ for c, _, _ in BREAKS}


def test_each_check_fails_on_a_deliberate_break(tmp_path):
    """Each rule, broken on purpose in a copy of the tree, fails its check, which names the broken file."""
    shutil.copytree(ROOT / "thrum", tmp_path / "thrum", ignore=shutil.ignore_patterns("__pycache__", "static"))
    missed = []
    for check, rel, code in BREAKS:
        target = tmp_path / rel
        target.parent.mkdir(parents=True, exist_ok=True)  # a package moved since: the break makes it anew
        original = target.read_text() if target.exists() else None
        target.write_text((original or "") + code)
        try:
            found = check(Tree(tmp_path))
        finally:
            if original is None:
                target.unlink()
            else:
                target.write_text(original)
        named = rel.removesuffix(".py").replace("/", ".")
        if not found or not (
            check is the_core_pulls_in_neither_trio_nor_pygit2 or any(rel in f or named in f for f in found)
        ):
            missed.append((check.__name__, rel, found))
    assert missed == []
