"""Families over lists: windows, scans, searching, reshaping, sorting with keys."""

from __future__ import annotations

import random

from bench.families.base import LIST_NAMES, Draft, fill, ints, word


def window_sums(rng: random.Random) -> Draft:
    w, name = rng.randint(2, 4), rng.choice(LIST_NAMES)
    agg = rng.choice(["sum", "max", "min"])
    program = fill(
        """
def f(<<name>>, w=<<w>>):
    if len(<<name>>) < w:
        return []
    return [<<agg>>(<<name>>[i:i + w]) for i in range(len(<<name>>) - w + 1)]
""",
        name=name,
        w=w,
        agg=agg,
    )
    return Draft(program, lambda r: repr(ints(r)), f"{agg} of each window of {w}")


def prefix_scan(rng: random.Random) -> Draft:
    op = rng.choice(["operator.add", "operator.mul", "max", "min", "operator.xor"])
    program = fill(
        """
import operator
from itertools import accumulate

def f(<<name>>):
    return list(accumulate(<<name>>, <<op>>))
""",
        name=rng.choice(LIST_NAMES),
        op=op,
    )
    return Draft(program, lambda r: repr(ints(r, -5, 9, 0, 7)), f"running {op.split('.')[-1]}")


def two_sum(rng: random.Random) -> Draft:
    found = rng.choice(["(seen[target - x], i)", "[seen[target - x], i]", "(x, target - x)"])
    program = fill(
        """
def f(<<name>>, target):
    seen = {}
    for i, x in enumerate(<<name>>):
        if target - x in seen:
            return <<found>>
        seen[x] = i
    return None
""",
        name=rng.choice(LIST_NAMES),
        found=found,
    )
    return Draft(
        program, lambda r: f"{ints(r, 0, 20, 2, 8)}, {r.randint(0, 30)}", "find a pair with the given sum"
    )


def lis_length(rng: random.Random) -> Draft:
    strict = rng.random() < 0.5
    program = fill(
        """
from bisect import <<fn>>

def f(<<name>>):
    tails = []
    for x in <<name>>:
        i = <<fn>>(tails, x)
        if i == len(tails):
            tails.append(x)
        else:
            tails[i] = x
    return len(tails)
""",
        name=rng.choice(LIST_NAMES),
        fn="bisect_left" if strict else "bisect_right",
    )
    return Draft(program, lambda r: repr(ints(r, 0, 15, 0, 10)), "longest increasing subsequence length")


def dedupe_transform(rng: random.Random) -> Draft:
    expr = rng.choice(["x * x", "x % 7", "abs(x) + 1", "x // 2", "-x"])
    program = fill(
        """
def f(<<name>>):
    seen = set()
    out = []
    for x in <<name>>:
        y = <<expr>>
        if y not in seen:
            seen.add(y)
            out.append(y)
    return out
""",
        name=rng.choice(LIST_NAMES),
        expr=expr,
    )
    return Draft(program, lambda r: repr(ints(r)), f"unique values of {expr}, first seen first")


def rotate(rng: random.Random) -> Draft:
    k, name = rng.randint(1, 5), rng.choice(LIST_NAMES)
    direction = rng.choice(["left", "right"])
    expr = f"{name}[k:] + {name}[:k]" if direction == "left" else f"{name}[-k:] + {name}[:-k]"
    program = fill(
        """
def f(<<name>>, k=<<k>>):
    if not <<name>>:
        return <<name>>
    k %= len(<<name>>)
    return <<expr>>
""",
        name=name,
        k=k,
        expr=expr,
    )
    return Draft(program, lambda r: repr(ints(r)), f"rotate {direction} by {k}")


def chunks(rng: random.Random) -> Draft:
    size, wrap = rng.randint(2, 4), rng.choice(["tuple", "list", "sum"])
    program = fill(
        """
def f(<<name>>, size=<<size>>):
    return [<<wrap>>(<<name>>[i:i + size]) for i in range(0, len(<<name>>), size)]
""",
        name=rng.choice(LIST_NAMES),
        size=size,
        wrap=wrap,
    )
    return Draft(program, lambda r: repr(ints(r, 0, 9)), f"split into chunks of {size}, each as {wrap}")


def flatten(rng: random.Random) -> Draft:
    depth_limit = rng.randint(1, 4)
    program = fill(
        """
def flatten(value, depth):
    if not isinstance(value, list) or depth == 0:
        return [value]
    out = []
    for item in value:
        out.extend(flatten(item, depth - 1))
    return out

def f(nested):
    return flatten(nested, <<d>>)
""",
        d=depth_limit,
    )

    def make(r: random.Random) -> str:
        def build(level: int) -> object:
            if level == 0 or r.random() < 0.4:
                return r.randint(0, 9)
            return [build(level - 1) for _ in range(r.randint(0, 3))]

        return repr([build(4) for _ in range(r.randint(1, 4))])

    return Draft(program, make, f"flatten up to depth {depth_limit}")


def k_smallest(rng: random.Random) -> Draft:
    k, fn = rng.randint(1, 4), rng.choice(["nsmallest", "nlargest"])
    program = fill(
        """
import heapq

def f(<<name>>, k=<<k>>):
    return heapq.<<fn>>(k, <<name>>)
""",
        name=rng.choice(LIST_NAMES),
        k=k,
        fn=fn,
    )
    return Draft(program, lambda r: repr(ints(r)), f"{fn} {k}")


def merge_intervals(rng: random.Random) -> Draft:
    touch = rng.choice(["<=", "<"])
    result = rng.choice(
        ["[tuple(iv) for iv in merged]", "merged", "len(merged)", "sum(b - a for a, b in merged)"]
    )
    program = fill(
        """
def f(intervals):
    merged = []
    for start, end in sorted(intervals):
        if merged and start <<op>> merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return <<result>>
""",
        op=touch,
        result=result,
    )

    def make(r: random.Random) -> str:
        return repr([(a, a + r.randint(0, 5)) for a in (r.randint(0, 20) for _ in range(r.randint(0, 6)))])

    return Draft(program, make, "merge overlapping intervals")


def sort_records(rng: random.Random) -> Draft:
    key = rng.choice(["(-r[1], r[0])", "(r[1], r[0])", "(len(r[0]), r[0])", "(r[1] % 3, -r[1], r[0])"])
    program = fill(
        """
def f(records):
    return sorted(records, key=lambda r: <<key>>)
""",
        key=key,
    )
    return Draft(
        program,
        lambda r: repr([(word(r, 2, 6), r.randint(0, 100)) for _ in range(r.randint(0, 6))]),
        f"sort by {key}",
    )


def bits(rng: random.Random) -> Draft:
    mask = rng.randint(1, 255)
    program = fill(
        """
def f(<<name>>):
    return [bin(x ^ <<mask>>).count('1') for x in <<name>> if x >= 0]
""",
        name=rng.choice(LIST_NAMES),
        mask=mask,
    )
    return Draft(program, lambda r: repr(ints(r, -3, 300)), f"popcount after xor {mask}")
