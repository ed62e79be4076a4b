"""Families over numbers: recursion with memoisation, number theory, bases, fractions, statistics."""

from __future__ import annotations

import random

from bench.families.base import LIST_NAMES, Draft, fill, ints


def stairs(rng: random.Random) -> Draft:
    steps = sorted(rng.sample(range(1, 5), rng.randint(1, 3)))
    mod = rng.choice([10**9 + 7, 1000, 97])
    program = fill(
        """
from functools import lru_cache

STEPS = <<steps>>

@lru_cache(maxsize=None)
def ways(n):
    if n == 0:
        return 1
    return sum(ways(n - s) for s in STEPS if s <= n) % <<mod>>

def f(n):
    return ways(n)
""",
        steps=tuple(steps),
        mod=mod,
    )
    return Draft(program, lambda r: str(r.randint(0, 40)), f"ways to climb with steps {steps}")


def gcd_lcm(rng: random.Random) -> Draft:
    which = rng.choice(["gcd", "lcm"])
    program = fill(
        """
import math
from functools import reduce

def f(<<name>>):
    if not <<name>>:
        return 0
    return reduce(math.<<which>>, <<name>>)
""",
        name=rng.choice(LIST_NAMES),
        which=which,
    )
    return Draft(program, lambda r: repr(ints(r, 1, 60, 0, 6)), f"{which} of the list")


def digit_sum(rng: random.Random) -> Draft:
    base, root = rng.choice([2, 3, 8, 10, 16]), rng.random() < 0.5
    loop = f"while n >= {base}:\n        n = digits(n)" if root else "n = digits(n)"
    program = fill(
        """
def digits(n):
    total = 0
    while n:
        n, r = divmod(n, <<base>>)
        total += r
    return total

def f(n):
    n = abs(n)
    <<loop>>
    return n
""",
        base=base,
        loop=loop,
    )
    kind = "root" if root else "sum"
    return Draft(program, lambda r: str(r.randint(-(10**6), 10**9)), f"digit {kind} in base {base}")


def sieve(rng: random.Random) -> Draft:
    mod, rem = rng.choice([(1, 0), (4, 1), (4, 3), (6, 1), (10, 3)])
    result = rng.choice(["[<<pick>>]", "len([<<pick>>])", "sum([<<pick>>])"])
    pick = "p for p in range(limit + 1) if is_prime[p] and p % <<mod>> == <<rem>>"
    program = fill(
        """
def f(limit):
    if limit < 2:
        return []
    is_prime = [True] * (limit + 1)
    is_prime[0] = is_prime[1] = False
    for p in range(2, int(limit ** 0.5) + 1):
        if is_prime[p]:
            for q in range(p * p, limit + 1, p):
                is_prime[q] = False
    return <<result>>
""".replace("<<result>>", result.replace("<<pick>>", pick)),
        mod=mod,
        rem=rem,
    )
    return Draft(program, lambda r: str(r.randint(0, 120)), f"primes that are {rem} mod {mod}")


def collatz(rng: random.Random) -> Draft:
    a, b = rng.choice([(3, 1), (3, -1), (5, 1), (5, 3)])
    cap = rng.choice([50, 100, 200])
    step = f"{a} * n + {b}" if b > 0 else f"{a} * n - {-b}"
    program = fill(
        """
def f(n, cap=<<cap>>):
    steps = 0
    while n != 1 and steps < cap:
        n = n // 2 if n % 2 == 0 else <<step>>
        steps += 1
    return steps, n
""",
        cap=cap,
        step=step,
    )
    return Draft(program, lambda r: str(r.randint(1, 300)), f"steps of n -> {step} on odd n, n // 2 on even")


def to_base(rng: random.Random) -> Draft:
    base = rng.choice([2, 3, 5, 7, 8, 12, 16])
    program = fill(
        """
import string

def f(n):
    digits = string.digits + string.ascii_lowercase
    if n == 0:
        return '0'
    sign = '-' if n < 0 else ''
    n = abs(n)
    out = []
    while n:
        n, r = divmod(n, <<base>>)
        out.append(digits[r])
    return sign + ''.join(reversed(out))
""",
        base=base,
    )
    return Draft(program, lambda r: str(r.randint(-5000, 100000)), f"write in base {base}")


def harmonic(rng: random.Random) -> Draft:
    program = fill(
        """
from fractions import Fraction

def f(<<name>>):
    total = sum((Fraction(<<num>>, x) for x in <<name>> if x != 0), Fraction(0))
    return (total.numerator, total.denominator)
""",
        name=rng.choice(LIST_NAMES),
        num=rng.randint(1, 3),
    )
    return Draft(program, lambda r: repr(ints(r, -6, 12, 0, 6)), "sum of reciprocals as a fraction")


def coin_change(rng: random.Random) -> Draft:
    coins = sorted(rng.sample([1, 2, 3, 5, 7, 10, 25], rng.randint(2, 4)))
    program = fill(
        """
def f(amount, coins=<<coins>>):
    INF = amount + 1
    best = [0] + [INF] * amount
    for a in range(1, amount + 1):
        for c in coins:
            if c <= a and best[a - c] + 1 < best[a]:
                best[a] = best[a - c] + 1
    return best[amount] if best[amount] != INF else -1
""",
        coins=coins,
    )
    return Draft(program, lambda r: str(r.randint(0, 60)), f"fewest coins from {coins}")


def stats(rng: random.Random) -> Draft:
    fn = rng.choice(["mean", "median", "pstdev"])
    program = fill(
        """
import statistics

def f(<<name>>):
    if len(<<name>>) < 1:
        return None
    return round(statistics.<<fn>>(<<name>>), <<digits>>)
""",
        name=rng.choice(LIST_NAMES),
        fn=fn,
        digits=rng.randint(1, 4),
    )
    return Draft(program, lambda r: repr(ints(r, -10, 40, 1, 8)), f"rounded {fn}")
