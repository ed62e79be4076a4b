"""Families over dicts, small classes and grids."""

from __future__ import annotations

import random

from bench.families.base import Draft, fill, word


def group_words(rng: random.Random) -> Draft:
    key = rng.choice(["w[0]", "len(w)", "w[-1]", "sorted(w)[0]"])
    program = fill(
        """
from collections import defaultdict

def f(words):
    groups = defaultdict(list)
    for w in words:
        groups[<<key>>].append(w)
    return {k: sorted(v) for k, v in groups.items()}
""",
        key=key,
    )
    return Draft(program, lambda r: repr([word(r, 1, 6) for _ in range(r.randint(1, 7))]), f"group by {key}")


def invert_dict(rng: random.Random) -> Draft:
    order = rng.choice(
        ["sorted(mapping.items())", "mapping.items()", "sorted(mapping.items(), reverse=True)"]
    )
    collect = rng.choice(["[]).append(key)", "set()).add(key)"])
    program = fill(
        """
def f(mapping):
    inverted = {}
    for key, value in <<order>>:
        inverted.setdefault(value, <<collect>>
    return inverted
""",
        order=order,
        collect=collect,
    )
    return Draft(
        program,
        lambda r: repr({word(r, 1, 4): r.randint(0, 3) for _ in range(r.randint(0, 6))}),
        "invert a mapping",
    )


def stack_machine(rng: random.Random) -> Draft:
    cls = rng.choice(["Stack", "Machine", "Calc", "VM"])
    extra = rng.choice(["sub", "max", "swap"])
    program = fill(
        """
class <<cls>>:
    def __init__(self):
        self.items = []

    def run(self, op):
        if op == 'dup' and self.items:
            self.items.append(self.items[-1])
        elif op == 'add' and len(self.items) >= 2:
            self.items.append(self.items.pop() + self.items.pop())
        elif op == 'mul' and len(self.items) >= 2:
            self.items.append(self.items.pop() * self.items.pop())
        elif op == 'pop' and self.items:
            self.items.pop()
        elif op == '<<extra>>' and len(self.items) >= 2:
            b, a = self.items.pop(), self.items.pop()
            self.items.extend(<<extra_result>>)
        elif isinstance(op, int):
            self.items.append(op)

def f(program):
    machine = <<cls>>()
    for op in program:
        machine.run(op)
    return machine.items
""",
        cls=cls,
        extra=extra,
        extra_result={"sub": "[a - b]", "max": "[max(a, b)]", "swap": "[b, a]"}[extra],
    )

    def make(r: random.Random) -> str:
        choices: list[object] = ["dup", "add", "mul", "pop", extra]
        return repr([r.choice([*choices, r.randint(-5, 9)]) for _ in range(r.randint(1, 9))])

    return Draft(program, make, "run a tiny stack machine")


def matrix(rng: random.Random) -> Draft:
    expr, message = rng.choice(
        [
            ("[list(row) for row in zip(*m)]", "transpose"),
            ("[list(row)[::-1] for row in zip(*m)]", "rotate clockwise"),
            ("sum(m[i][i] for i in range(min(len(m), len(m[0]))))", "trace"),
            ("[sum(col) for col in zip(*m)]", "column sums"),
            ("[max(row) - min(row) for row in m]", "row ranges"),
        ]
    )
    program = fill("def f(m):\n    return <<expr>>\n", expr=expr)

    def make(r: random.Random) -> str:
        rows, cols = r.randint(1, 4), r.randint(1, 4)
        return repr([[r.randint(-9, 9) for _ in range(cols)] for _ in range(rows)])

    return Draft(program, make, message)


def inventory(rng: random.Random) -> Draft:
    tax = rng.choice([0, 5, 8, 20])
    program = fill(
        """
from dataclasses import dataclass

@dataclass
class Item:
    name: str
    price: int
    qty: int

    def total(self) -> int:
        return self.price * self.qty * (100 + <<tax>>) // 100

def f(rows):
    items = [Item(*row) for row in rows]
    return {item.name: item.total() for item in items if item.qty > 0}
""",
        tax=tax,
    )
    return Draft(
        program,
        lambda r: repr([(word(r, 3, 6), r.randint(1, 50), r.randint(0, 5)) for _ in range(r.randint(0, 5))]),
        f"totals with {tax}% tax",
    )


def grid_path(rng: random.Random) -> Draft:
    wall = rng.choice(["#", "X"])
    moves = rng.choice(
        [
            "((1, 0), (-1, 0), (0, 1), (0, -1))",
            "((0, 1), (1, 0), (0, -1), (-1, 0))",
            "((1, 0), (0, 1), (1, 1))",
        ]
    )
    program = fill(
        """
from collections import deque

def f(grid):
    rows, cols = len(grid), len(grid[0])
    queue = deque([(0, 0, 0)])
    seen = {(0, 0)}
    while queue:
        r, c, d = queue.popleft()
        if (r, c) == (rows - 1, cols - 1):
            return d
        for dr, dc in <<moves>>:
            nr, nc = r + dr, c + dc
            if 0 <= nr < rows and 0 <= nc < cols and grid[nr][nc] != '<<wall>>' and (nr, nc) not in seen:
                seen.add((nr, nc))
                queue.append((nr, nc, d + 1))
    return -1
""",
        wall=wall,
        moves=moves,
    )

    def make(r: random.Random) -> str:
        rows, cols = r.randint(1, 5), r.randint(1, 5)
        grid = ["".join(wall if r.random() < 0.25 else "." for _ in range(cols)) for _ in range(rows)]
        grid[0] = "." + grid[0][1:]
        return repr(grid)

    return Draft(program, make, "shortest path through a grid")
