"""Message bodies for the benchmark logs: words as a team's messages use them.

Why not a short word list: with 40 words, every word is in ~38 % of the messages,
so any two-word search matches ~15 % of the log, which no real log does and no
index can rank in milliseconds (BENCHMARKS.md, "search"). Real text follows
Zipf's law: a few function words are everywhere, most words are rare. So:

- 120 English function words take the top ranks, then the 38 topic words the
  store benchmark always used ("auth module tests ..."), then 40,000 made-up
  content words; a token is drawn with probability ~ 1/rank (Zipf, s = 1), which
  makes about half the tokens function words, as in English prose;
- 8 % of tokens are code identifiers built from content words: ``snake_case``
  (3 %), ``dotted.names`` (2 %), ``CamelCase`` (2 %) and ``paths/like/this.py`` (1 %);
- bodies have 8-30 tokens and ~126 characters on average, like the word-list
  bodies they replace (the rebuild and the inbox read as many bytes as before).

Deterministic: the same seed gives the same words and the same bodies.
"""

from __future__ import annotations

import bisect
import itertools
import random

FUNCTION_WORDS = (
    "the to and a of in is for on that it this with be we as at not are from but by or have if will can so "
    "i you an was all do there should when no now just then what which after before need up out one more "
    "also into than only still new about our them they here its same back some any each other how why where "
    "who has had been were would could did does done get got make made see use used like well very much many "
    "first last next both over under again once ok yes let me my your us his her their these those such"
).split()
TOPIC_WORDS = (
    "auth module tests green review ready merge deploy failing flaky fix patch branch rebase conflict schema "
    "migration index query latency budget release notes docs api client server daemon sync remote push fetch "
    "worktree shard event projection fold rebuild"
).split()
_ONSETS = "b c d f g h k l m n p r s t v w b c d g l m n p r s t br cl dr fl gr pl sk st tr th sh ch".split()
_VOWELS = "a e i o u a e i o u ai ea ou".split()
_CODAS = ["", "", "", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ck", "ng", "x"]
N_CONTENT = 40_000


def _made_up_words(rng: random.Random, n: int, taken: set[str]) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        syllables = rng.choice((1, 1, 2, 2, 3))
        w = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables))
        if len(w) > 2 and w not in taken:
            taken.add(w)
            out.append(w)
    return out


class BodyText:
    """Draws message bodies; one instance per log (it owns its random generator)."""

    def __init__(self, seed: int = 3):
        self.rng = random.Random(seed)
        taken = set(FUNCTION_WORDS) | set(TOPIC_WORDS)
        self.words = FUNCTION_WORDS + TOPIC_WORDS + _made_up_words(self.rng, N_CONTENT, taken)
        self.n_function = len(FUNCTION_WORDS)
        self._cum = list(itertools.accumulate(1.0 / rank for rank in range(1, len(self.words) + 1)))
        self._total = self._cum[-1]

    def word(self) -> str:
        return self.words[bisect.bisect(self._cum, self.rng.random() * self._total)]

    def content_word(self) -> str:
        while True:
            i = bisect.bisect(self._cum, self.rng.random() * self._total)
            if i >= self.n_function:
                return self.words[i]

    def token(self) -> str:
        r = self.rng.random()
        if r >= 0.08:
            return self.word()
        a, b = self.content_word(), self.content_word()
        if r < 0.03:
            return f"{a}_{b}"
        if r < 0.05:
            return f"{a}.{b}"
        if r < 0.07:
            return a.capitalize() + b.capitalize()
        return f"{a}/{b}.py"

    def body(self, n_tokens: int) -> str:
        return " ".join(self.token() for _ in range(n_tokens))


if __name__ == "__main__":
    import statistics

    text = BodyText()
    bodies = [text.body(text.rng.randint(8, 30)) for _ in range(20_000)]
    print("\n".join(bodies[:5]))
    print(f"mean length {statistics.mean(map(len, bodies)):.1f} characters")
