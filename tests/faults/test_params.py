"""Finding 6 of issue 15: out-of-range params are -32602 everywhere, never -32603.

The params each method reads are found in the service sources, so a param added
later is fuzzed too: every one gets huge, negative, fractional and extreme
numbers (JSON has no NaN or Infinity; 1e400 does not parse and is -32700).
"""

from __future__ import annotations

import re
from pathlib import Path

from thrum import errors
from thrum.daemon import service  # noqa: F401  (registers every method)

from faults_helpers import raw_socket

SERVICE_DIR = Path(service.__file__).parent
NUMBERS = [
    10**6,
    2**31,
    2**53 + 1,
    2**63 - 1,
    2**63,
    2**64 - 1,
    -1,
    -(2**63),
    0.5,
    1e6,
    1e15,
    1e308,
    -1e308,
    2.2250738585072014e-308,
]
SKIP = {"daemon.stop"}  # would end the test


def params_by_method() -> dict[str, set[str]]:
    """Each method's params, read off the service modules: every param read in a module of its
    namespace (message.* spans three) or in a helper module (no methods), to be thorough."""
    by_namespace: dict[str, set[str]] = {}
    methods: dict[str, str] = {}
    helpers: set[str] = set()
    for path in SERVICE_DIR.glob("*.py"):
        text = path.read_text()
        names = set(re.findall(r'\.(?:str|int|number|bool|str_list|tag|tags|any)\(\s*"(\w+)"', text))
        names |= set(re.findall(r"key_param\(", text) and ["idempotency_key"])
        found = re.findall(r'@method\("([\w.]+)"\)', text)
        if not found:
            helpers |= names
        for method in found:
            namespace = method.split(".")[0]
            by_namespace.setdefault(namespace, set()).update(names)
            methods[method] = namespace
    return {method: by_namespace[ns] | helpers | {"caller"} for method, ns in methods.items()}


class Pipe:
    """Many requests on one connection, answers read as they come (fast, and in order)."""

    def __init__(self, paths):
        self.sock = raw_socket(paths, timeout=60)
        self.buf = b""

    def ask(self, requests: list[dict]) -> list[dict]:
        """Answers in request order (the daemon answers in the order replies are ready)."""
        import json

        answers: list[dict] = []
        for start in range(0, len(requests), 16):
            chunk = requests[start : start + 16]
            self.sock.sendall(
                b"".join(
                    json.dumps(
                        {"jsonrpc": "2.0", "id": start + i, "method": r["method"], "params": r["params"]}
                    ).encode()
                    + b"\n"
                    for i, r in enumerate(chunk)
                )
            )
            while len(answers) < start + len(chunk):
                while b"\n" not in self.buf:
                    data = self.sock.recv(1 << 20)
                    assert data, "the daemon hung up"
                    self.buf += data
                line, self.buf = self.buf.split(b"\n", 1)
                answers.append(json.loads(line))
        return sorted(answers, key=lambda a: a["id"])


def test_every_numeric_param_out_of_range_is_a_params_error(fresh):
    d = fresh()
    d.register("alice")
    mid = d.call("message.send", {"caller": "alice", "content": "target"})["message_id"]
    base = {"caller": "alice", "message_id": mid, "name": "alice", "timeout": 0}
    requests = []
    for method, names in sorted(params_by_method().items()):
        if method in SKIP:
            continue
        for name in sorted(names):
            for value in NUMBERS:
                requests.append({"method": method, "params": {**base, name: value}})
    answers = Pipe(d.paths).ask(requests)
    internal = [
        (r["method"], r["params"], a["error"]["message"])
        for r, a in zip(requests, answers)
        if "error" in a and a["error"]["code"] == errors.INTERNAL_ERROR
    ]
    assert internal == [], f"{len(internal)} internal errors, e.g. {internal[:5]}"
    assert "Traceback" not in d.log_text()
    assert len(requests) > 500


def test_agent_cleanup_with_huge_ages_is_a_params_error(fresh):
    """The finding itself: older_than_days 1e6 or 2**63 overflowed the date arithmetic."""
    d = fresh()
    for days in (1e6, 2**63, 10**30):
        try:
            d.call("agent.cleanup", {"older_than_days": days})
        except errors.ValidationError as exc:
            assert exc.data["field"] == "older_than_days"
        else:
            raise AssertionError(f"older_than_days={days} was accepted")
    assert d.call("agent.cleanup", {"older_than_days": 36500})["removed"] == []
