"""The layers hold: what each part of thrum may import, where SQL may appear, how big a room may grow.

docs/design/architecture.md is the map; these tests fail when the code leaves it:

- front ends (cli, mcp, gcmail, ui) reach the daemon only through `thrum.client`
  and `thrum.lifecycle`: they import neither `thrum.daemon` nor `thrum.store`, and
  of `thrum.sync` only the offline cycle;
- `thrum.store` and `thrum.sync` never import the daemon, nor each other, not even
  through what they import;
- `thrum.sync` is layered: `merge/` is pure, no module imports another back in a
  circle, nothing is re-exported (a name is imported from the module that
  defines it), and nothing outside `sync` imports its `gitstore/` (each of these is
  proved by breaking it in a copy of the tree);
- SQL (execute calls, SQL statements in strings) appears only in `thrum/store/`;
- the pure core imports neither trio nor pygit2, directly or through what it imports;
- RPC services use their narrow context (`call.ctx`), never the daemon itself;
- no module imports another module's private names;
- no module grows past ~450 lines without a reason written down here, and the lists of
  exceptions name only what still needs one.

The checks read the source (ast), so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
THRUM = ROOT / "thrum"

FRONT_ENDS = ("cli", "mcp", "gcmail", "hooks", "ui")  # the latter three may not exist yet
PURE_CORE = (
    "thrum/events",
    "thrum/errors.py",
    "thrum/jsonrpc.py",
    "thrum/framing.py",
    "thrum/search_query.py",
    "thrum/presence.py",
    "thrum/cli/render",
    "thrum/sync/merge",
    "thrum/hooks/hosts.py",
    "thrum/hooks/jsonc.py",
)
IMPURE = ("trio", "trio_websocket", "pygit2")
MAX_LINES = 450

# Modules allowed past MAX_LINES, each with its reason. Keep this list short.
LONG_MODULES: dict[str, str] = {
    "thrum/store/log.py": "the one owner of the log's files (issue 28): appending with its undo, replacing "
    "merged segments, reading from positions and reporting them; split, each half would reach into the other",
    "thrum/daemon/syncer.py": "the sync loop: cycles, the pace's looks (issue 30) and the status that never waits "
    "for a cycle; past the mark when the adaptive pace met the team file and chain checks (issue 25) in one merge: "
    "the looks and the pending count (`_worth_a_cycle`, `_count_pending`) are the piece to move out next",
    "thrum/daemon/server.py": "the nursery, start-up and shutdown; past the mark by a few lines when the checkout "
    "watch and the config warning (issue 30) met the lead's merge train: the start-up steps (`_open_store` and "
    "its helpers) are the piece to move out next",
    "thrum/sync/transport/credentials.py": "every login a network operation may need (HTTPS token, helper and the "
    "login sent at once, SSH keys and host keys) and the one-line translation of libgit2's errors; past the mark "
    "when the push-first negotiation and the login sent at once (issue 30) came in: `translate` and its helpers "
    "are the piece to move out next",
    "thrum/nofollow.py": "no link ever followed, for reads, walks and writes alike; the durable writes "
    "(write_atomic, write_batch, fsync_*) are the half to move out next (issue 28.5)",
}

# Private names imported across modules, each with its reason. Keep this list empty.
PRIVATE_IMPORTS: dict[tuple[str, str], str] = {}

SQL_STATEMENT = re.compile(
    r"\b(SELECT\s.+?\sFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|"
    r"CREATE\s+(TABLE|INDEX|TRIGGER|VIEW)|DROP\s+(TABLE|INDEX|VIEW)|PRAGMA\s+\w+)",
    re.S,
)
SQL_CALLS = {"execute", "execute_sql", "executemany", "executescript"}


def _modules(under: Path) -> list[Path]:
    if under.is_file():
        return [under]
    return sorted(p for p in under.rglob("*.py") if "__pycache__" not in p.parts)


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, name: str | None = None) -> list[tuple[str, list[str], int]]:
    """(absolute module, imported names, line) for every import in the file, relative ones resolved.

    ``name``: the module's dotted name (default: from its path under the repository).
    """
    tree = ast.parse(path.read_text(), str(path))
    name = name or _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, [], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names = [alias.name for alias in node.names]
            out.append((module, names, node.lineno))
    return out


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _offences(
    paths: list[Path], banned: tuple[str, ...], allowed: tuple[str, ...] = (), name: str | None = None
) -> list[str]:
    def ok(module: str) -> bool:
        return not any(_within(module, b) for b in banned) or any(_within(module, a) for a in allowed)

    found = []
    for path in paths:
        for module, names, line in _imports(path, name):
            # `from thrum import daemon` imports thrum.daemon; `from thrum.sync import offline`
            # imports thrum.sync.offline (allowed) although it runs thrum/sync/__init__.py
            targets = [f"{module}.{n}" for n in names]
            bad = [t for t in targets if not ok(t)]
            if not ok(module) and (bad or not targets):
                bad = bad or [module]
            found += [f"{name or _rel(path)}:{line} imports {t}" for t in bad]
    return sorted(set(found))


# --------------------------------------------------------------------------- layers


def test_the_import_checker_sees_lazy_and_relative_imports(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os\ndef f():\n    from ..daemon import launcher\n    from .. import daemon\n    from . import render\n"
    )
    assert _offences([probe], ("thrum.daemon",), name="thrum.cli.probe") == [
        "thrum.cli.probe:3 imports thrum.daemon.launcher",
        "thrum.cli.probe:4 imports thrum.daemon",
    ]


def test_front_ends_reach_the_daemon_only_through_client_and_lifecycle():
    paths = [p for name in FRONT_ENDS if (THRUM / name).exists() for p in _modules(THRUM / name)]
    assert paths, "no front-end modules found"
    assert (
        _offences(
            paths,
            ("thrum.daemon", "thrum.store", "thrum.sync"),
            allowed=("thrum.sync.offline", "thrum.sync.verifyrange"),
        )
        == []
    )


def test_store_and_sync_never_import_the_daemon():
    paths = _modules(THRUM / "store") + _modules(THRUM / "sync")
    assert _offences(paths, ("thrum.daemon", "thrum.lifecycle", "thrum.cli")) == []


def _graph() -> dict[str, set[str]]:
    """thrum module -> the thrum modules it imports (lazy imports too; `from pkg import mod`
    counts as importing ``pkg.mod`` when that is a module)."""
    names = {_module_name(p): p for p in _modules(THRUM)}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        deps = set()
        for module, imported, _line in _imports(path):
            if not _within(module, "thrum"):
                continue
            targets = [f"{module}.{n}" for n in imported if f"{module}.{n}" in names]
            deps.update(targets or ([module] if module in names else []))
        deps.discard(name)
        graph[name] = deps
    return graph


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


def test_store_and_sync_never_import_each_other_not_even_indirectly():
    graph = _graph()
    found = []
    for name in sorted(graph):
        for own, other in (("thrum.store", "thrum.sync"), ("thrum.sync", "thrum.store")):
            if _within(name, own):
                chain = _reaches(graph, name, other)
                if chain is not None:
                    found.append(" -> ".join(chain))
    assert found == []


def test_sync_modules_import_no_circle():
    graph = {
        n: {d for d in deps if _within(d, "thrum.sync")} for n, deps in _graph().items() if _within(n, "thrum.sync")
    }
    circles = []
    for name in sorted(graph):
        for dep in graph[name]:
            back = _reaches(graph, dep, name)
            if back is not None and back[-1] == name:
                circles.append(" -> ".join([name, *back]))
    assert circles == []


def _defined_names(tree: ast.Module) -> set[str]:
    out = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out.update(t.id for t in targets if isinstance(t, ast.Name))
    return out


def test_the_sync_re_exports_nothing():
    """Every name in a sync module's ``__all__`` is defined there, and a package's
    ``__init__`` imports none of its modules: callers import from the module that defines
    a name, so a move breaks loudly instead of living on behind an old path. (The store
    keeps `projection` and `queries` as its deliberate entry points.)"""
    found = []
    for path in _modules(THRUM / "sync"):
        tree = ast.parse(path.read_text(), str(path))
        exported: list[str] = []
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                if isinstance(node.value, (ast.List, ast.Tuple)):
                    exported = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
        defined = _defined_names(tree)
        found += [f"{_rel(path)} exports {n}, defined elsewhere" for n in exported if n not in defined]
        if path.name == "__init__.py":
            package = _module_name(path)
            found += [
                f"{_rel(path)}:{line} imports {module}"
                for module, _names, line in _imports(path)
                if _within(module, package) and module != package
            ]
    assert found == []


def test_the_pure_core_imports_neither_trio_nor_pygit2():
    paths = [p for entry in PURE_CORE for p in _modules(ROOT / entry)]
    assert _offences(paths, IMPURE) == []


def test_the_pure_core_pulls_in_neither_trio_nor_pygit2_through_its_imports():
    names = [_module_name(p) for entry in PURE_CORE for p in _modules(ROOT / entry)]
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(sorted(m for m in {IMPURE!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- SQL


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _sql_in(path: Path, label: str | None = None) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    docs = _docstrings(tree)
    label = label or _rel(path)
    found = []
    for node in ast.walk(tree):
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


def test_the_sql_checker_finds_calls_and_statements(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""SELECT x FROM docs is fine."""\n'
        'def f(db, t):\n    db.execute_sql("SELECT a FROM b")\n    return f"DELETE FROM {t}"\n'
    )
    assert _sql_in(sample, "s") == [
        "s:3 calls .execute_sql()",
        "s:3 holds SQL 'SELECT a FROM b'",
        "s:4 holds SQL 'DELETE FROM '",
    ]


def test_sql_appears_only_in_the_store():
    paths = [p for p in _modules(THRUM) if not _within(_module_name(p), "thrum.store")]
    assert [hit for p in paths for hit in _sql_in(p)] == []


# --------------------------------------------------------------------------- services, private names, size


def test_services_use_their_narrow_context_not_the_daemon():
    found = []
    for path in _modules(THRUM / "daemon" / "service"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("daemon", "store")
                and isinstance(node.value, ast.Name)
                and node.value.id == "call"
            ):
                found.append(f"{_rel(path)}:{node.lineno} uses call.{node.attr}")
    assert found == []


def _private_imports() -> dict[tuple[str, str], str]:
    """(importing file, private name) -> where, for every import of another thrum module's private name."""
    found = {}
    for path in _modules(THRUM):
        for module, names, line in _imports(path):
            if not _within(module, "thrum") or module == _module_name(path):
                continue
            for name in names:
                if name.startswith("_") and not name.startswith("__"):
                    found[(_rel(path), name)] = f"{_rel(path)}:{line} imports {module}.{name}"
    return found


def test_no_module_imports_another_modules_private_names():
    found = _private_imports()
    assert [where for key, where in sorted(found.items()) if key not in PRIVATE_IMPORTS] == []


def _sizes() -> dict[str, int]:
    return {_rel(p): len(p.read_text().splitlines()) for p in _modules(THRUM)}


def test_no_module_is_too_big_without_a_stated_reason():
    too_big = {path: n for path, n in _sizes().items() if n > MAX_LINES and path not in LONG_MODULES}
    assert too_big == {}, "split these (or state why not in LONG_MODULES)"


def test_the_exception_lists_name_only_what_still_needs_an_exception():
    sizes = _sizes()
    assert [path for path in LONG_MODULES if sizes.get(path, 0) <= MAX_LINES] == [], "no longer long: drop them"
    assert [key for key in PRIVATE_IMPORTS if key not in _private_imports()] == [], "no longer imported: drop them"


# --------------------------------------------------------------------------- sync's own layers

# Who outside `thrum.sync` may import a `thrum.sync.gitstore` module, and why.
GITSTORE_USERS = {
    "thrum.daemon.server": "caps libgit2's process-wide object cache at start-up (bound_object_cache)",
}


def test_nothing_outside_sync_imports_the_gitstore():
    """The git store is sync's own: the rest of thrum reaches git through the cycle's
    modules, so the store can change (or be faked) without touching a caller."""
    found = []
    for path in _modules(THRUM):
        name = _module_name(path)
        if _within(name, "thrum.sync") or name in GITSTORE_USERS:
            continue
        found += _offences([path], ("thrum.sync.gitstore",))
    assert found == []


def test_each_gitstore_exception_is_still_needed():
    for name in GITSTORE_USERS:
        path = ROOT / (name.replace(".", "/") + ".py")
        assert _offences([path], ("thrum.sync.gitstore",)), f"{name} no longer imports the git store"


SYNC_BREAKS = {
    "test_the_pure_core_imports_neither_trio_nor_pygit2": (
        "thrum/sync/merge/shard.py",
        "\nimport pygit2  # injected\n",
    ),
    "test_sync_modules_import_no_circle": (
        "thrum/sync/gitstore/gitlib.py",
        "\ndef _injected():\n    from ..replicate import Replicator  # noqa: F401\n",
    ),
    "test_nothing_outside_sync_imports_the_gitstore": (
        "thrum/cli/sync.py",
        "\ndef _injected():\n    from ..sync.gitstore import objbatch  # noqa: F401\n",
    ),
}


def test_each_sync_layer_check_fails_on_a_deliberate_break(tmp_path):
    """Each rule of sync's layers, broken on purpose in a copy of the tree, fails its test."""
    import shutil

    shutil.copytree(THRUM, tmp_path / "thrum", ignore=shutil.ignore_patterns("__pycache__", "static"))
    (tmp_path / "tests").mkdir()
    shutil.copy(Path(__file__), tmp_path / "tests" / "test_architecture.py")
    for test, (rel, code) in SYNC_BREAKS.items():
        target = tmp_path / rel
        original = target.read_text()
        target.write_text(original + code)
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"tests/test_architecture.py::{test}"],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=120,
            )
        finally:
            target.write_text(original)
        assert proc.returncode == 1 and "1 failed" in proc.stdout, (test, proc.stdout[-2000:])
