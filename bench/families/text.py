"""Families over strings: ciphers, counting, parsing, formatting."""

from __future__ import annotations

import random

from bench.families.base import STR_NAMES, Draft, fill, sentence, word


def caesar(rng: random.Random) -> Draft:
    k, name = rng.randint(1, 25), rng.choice(STR_NAMES)
    keep_case = rng.random() < 0.5
    program = fill(
        """
def f(<<name>>):
    out = []
    for ch in <<name>>:
        if ch.isalpha():
            base = <<base>>
            out.append(chr((ord(<<ch>>) - base + <<k>>) % 26 + base))
        else:
            out.append(ch)
    return ''.join(out)
""",
        name=name,
        k=k,
        base="ord('A') if ch.isupper() else ord('a')" if keep_case else "ord('a')",
        ch="ch" if keep_case else "ch.lower()",
    )
    return Draft(program, lambda r: repr(sentence(r).title()), f"shift letters by {k}")


def run_length(rng: random.Random) -> Draft:
    sep = rng.choice(["", "-", ":"])
    piece = rng.choice(["ch + '<<sep>>' + str(n)", "str(n) + '<<sep>>' + ch"]).replace("<<sep>>", sep)
    program = fill(
        """
from itertools import groupby

def f(s):
    parts = []
    for ch, group in groupby(s):
        n = len(list(group))
        parts.append(<<piece>>)
    return ''.join(parts)
""",
        piece=piece,
    )
    return Draft(
        program, lambda r: repr("".join(r.choice("aab") * r.randint(1, 4) for _ in range(5))), "run lengths"
    )


def count_classes(rng: random.Random) -> Draft:
    vowels = "".join(sorted(rng.sample("aeiouy", rng.randint(3, 6))))
    program = fill(
        """
def f(text: str) -> dict:
    counts = {'vowel': 0, 'consonant': 0, 'other': 0}
    for ch in text.lower():
        if ch in '<<vowels>>':
            counts['vowel'] += 1
        elif ch.isalpha():
            counts['consonant'] += 1
        else:
            counts['other'] += 1
    return counts
""",
        vowels=vowels,
    )
    return Draft(program, lambda r: repr(sentence(r)), f"classify characters (vowels are {vowels})")


def top_words(rng: random.Random) -> Draft:
    k = rng.randint(1, 4)
    program = fill(
        """
from collections import Counter

def f(sentence, k=<<k>>):
    counts = Counter(sentence.split())
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [word for word, _ in ranked[:k]]
""",
        k=k,
    )
    return Draft(program, lambda r: repr(sentence(r) + " " + sentence(r)), f"the {k} most frequent words")


def palindrome(rng: random.Random) -> Draft:
    keep = rng.choice(["ch.isalnum()", "ch.isalpha()", "ch != ' '"])
    result = rng.choice(
        ["cleaned == cleaned[::-1], len(cleaned)", "cleaned == cleaned[::-1]", "''.join(cleaned)"]
    )
    program = fill(
        """
def f(s):
    cleaned = [ch.lower() for ch in s if <<keep>>]
    return <<result>>
""",
        keep=keep,
        result=result,
    )
    pals = ["Never odd or even", "A man, a plan, a canal: Panama", "abcba", "step on no pets"]
    return Draft(
        program, lambda r: repr(r.choice(pals) if r.random() < 0.5 else sentence(r)), "palindrome test"
    )


def reverse_words(rng: random.Random) -> Draft:
    joiner, each = rng.choice([" ", "_", "/"]), rng.random() < 0.5
    body = "words = [w[::-1] for w in line.split()]" if each else "words = line.split()[::-1]"
    program = fill(
        """
def f(line):
    <<body>>
    return '<<joiner>>'.join(words)
""",
        body=body,
        joiner=joiner,
    )
    return Draft(program, lambda r: repr(sentence(r)), "reverse " + ("each word" if each else "word order"))


def expand_codes(rng: random.Random) -> Draft:
    letters = rng.choice(["a-z", "a-zA-Z"])
    program = fill(
        """
import re

def f(code):
    return ''.join(ch * int(n or '<<default>>') for ch, n in re.findall(r'([<<letters>>])(\\d*)', code))
""",
        default=rng.randint(1, 3),
        letters=letters,
    )

    def make(r: random.Random) -> str:
        return repr(
            "".join(r.choice("abcxyzAB") + str(r.randint(0, 4)) * (r.random() < 0.7) for _ in range(4))
        )

    return Draft(program, make, "expand letter-count codes")


def brackets(rng: random.Random) -> Draft:
    pairs = rng.choice(["()[]", "()<>", "{}()", "[]{}"])
    tail = rng.choice(["-1 if not stack else len(s)", "not stack", "len(stack)"])
    program = fill(
        """
def f(s):
    pairs = {'<<c1>>': '<<o1>>', '<<c2>>': '<<o2>>'}
    stack = []
    for i, ch in enumerate(s):
        if ch in pairs.values():
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack.pop() != pairs[ch]:
                return i
    return <<tail>>
""",
        o1=pairs[0],
        c1=pairs[1],
        o2=pairs[2],
        c2=pairs[3],
        tail=tail,
    )
    return Draft(
        program, lambda r: repr("".join(r.choice(pairs) for _ in range(r.randint(0, 8)))), "bracket check"
    )


def anagrams(rng: random.Random) -> Draft:
    program = fill(
        """
def f(words):
    groups = {}
    for w in words:
        groups.setdefault(''.join(sorted(w<<norm>>)), []).append(w)
    return sorted(sorted(g) for g in groups.values() if len(g) >= <<min_size>>)
""",
        norm=rng.choice(["", ".lower()"]),
        min_size=rng.randint(1, 2),
    )
    pool = ["listen", "silent", "enlist", "google", "gogole", "cat", "act", "tac", "dog", "god", "Tab", "bat"]
    return Draft(program, lambda r: repr(r.sample(pool, r.randint(1, 8))), "group anagrams")


def extract_numbers(rng: random.Random) -> Draft:
    pattern, agg = rng.choice([(r"-?\d+", "sum"), (r"\d+", "max"), (r"\d+", "len"), (r"-?\d+", "min")])
    program = fill(
        """
import re

def f(text):
    found = [int(m) for m in re.findall(r'<<pattern>>', text)]
    return <<agg>>(found) if found else 0
""",
        pattern=pattern,
        agg=agg,
    )

    def make(r: random.Random) -> str:
        return repr(
            " ".join(r.choice([word(r, 1, 4), str(r.randint(-50, 500))]) for _ in range(r.randint(1, 6)))
        )

    return Draft(program, make, f"{agg} of the numbers in the text")


def letter_positions(rng: random.Random) -> Draft:
    offset = rng.randint(0, 3)
    program = fill(
        """
import string

def f(word):
    letters = string.ascii_lowercase
    return [letters.index(ch) + <<offset>> for ch in word.lower() if ch in letters]
""",
        offset=offset,
    )
    return Draft(program, lambda r: repr(word(r).capitalize()), f"letter positions from {offset}")
