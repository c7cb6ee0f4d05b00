"""The trust check alone: what judging received lines and a rebuild's lines costs.

Plain Python printing a table. It builds signed, sealed lines of 50 agents in memory (as
the daemon writes them) and times `Verifier.check` on (1) a received batch of 10,000
lines, new to the replica (one seal verification per agent), and (2) a rebuild's lines
all found in the verdict memory. Run it against any tree (PYTHONPATH=that tree) to
compare two versions on the same machine: the sync and store sections measure the
whole paths, this one isolates what issue 25's rules add to them.

    python scripts/bench_verdicts.py [--received 10000] [--rebuild 200000] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import time


def build(n: int, agents: int = 50):
    from thrum import events as ev
    from thrum.trust import keys, signing
    from thrum.trust.verdicts import digest

    pairs = []
    for i in range(agents):
        private = keys.generate()
        pairs.append((f"agent{i:02d}", private, keys.PublicKey(keys.public_raw(private))))
    regs = [
        ev.encode_line(
            signing.sign(
                ev.AgentRegister(agent_id=name, name=name, role="worker", public_key=pub.b64).to_dict(), name, priv
            )
        ).rstrip(b"\n")
        for name, priv, pub in pairs
    ]
    lines, by_agent = [], {}
    for j in range(n):
        name, priv, pub = pairs[j % agents]
        d = ev.MessageCreate(
            message_id=signing.new_message_id(pub.tag),
            agent_id=name,
            session_id="ses_01JD0000000000000000000000",
            body=ev.Body(f"message {j} of the benchmark"),
        ).to_dict()
        line = ev.encode_line(signing.sign(d, name, priv)).rstrip(b"\n")
        lines.append(line)
        by_agent.setdefault(name, []).append(line)
    seals = [
        ev.encode_line(signing.make_seal(name, [signing.line_hash(x) for x in by_agent[name]], priv)).rstrip(b"\n")
        for name, priv, _ in pairs
        if name in by_agent
    ]
    return regs, lines, seals, {digest(x) for x in lines}


def candidates(lines):
    from thrum import events as ev
    from thrum.trust.verify import Candidate

    return [Candidate("messages/x/000001.jsonl", x, ev.decode_line(x)) for x in lines]


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--received", type=int, default=10_000)
    p.add_argument("--rebuild", type=int, default=200_000)
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args(argv)
    from thrum.trust.ring import KeyRing
    from thrum.trust.verify import Verifier

    def timed(n: int, remembered: bool) -> list[float]:
        regs, lines, seals, memory = build(n)
        batch = candidates(regs) + candidates(lines) + candidates(seals)
        out = []
        for _ in range(args.runs):
            v = Verifier(KeyRing(), skew_s=600)
            t0 = time.perf_counter()
            verdict = v.check(list(batch), memory if remembered else None)
            out.append((time.perf_counter() - t0) * 1000)
            assert not verdict.rejected and len(verdict.accepted) == len(regs) + len(lines)
        return out

    received = timed(args.received, False)
    rebuild = timed(args.rebuild, True)
    print(f"{'metric':<58} {'median':>10}  (min–max)")
    print(
        f"{'check of ' + format(args.received, ',') + ' received lines (50 agents, sealed)':<58} "
        f"{statistics.median(received):>8.0f} ms  ({min(received):.0f}–{max(received):.0f})"
    )
    print(
        f"{'check of ' + format(args.rebuild, ',') + ' remembered lines (a rebuild)':<58} "
        f"{statistics.median(rebuild):>8.0f} ms  ({min(rebuild):.0f}–{max(rebuild):.0f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
