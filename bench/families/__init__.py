"""Parametrised program families for the benchmark corpus (see ``bench.corpus``).

Each family draws its parameters (constants, names, operators, small style choices) from a seeded
``random.Random`` and returns a ``Draft``: the program, a function that draws one argument-list text, and a
one-line message in the spirit of an induction task's hint. Programs use only modules the static gate
allows and return only supported literal values, without depending on hash order.
"""

from __future__ import annotations

from bench.families import numbers, sequences, structures, text
from bench.families.base import Draft, Family

__all__ = ["FAMILIES", "Draft", "Family"]

FAMILIES: tuple[Family, ...] = (
    text.caesar,
    text.run_length,
    text.count_classes,
    text.top_words,
    text.palindrome,
    text.reverse_words,
    text.expand_codes,
    text.brackets,
    text.anagrams,
    text.extract_numbers,
    text.letter_positions,
    sequences.window_sums,
    sequences.prefix_scan,
    sequences.two_sum,
    sequences.lis_length,
    sequences.dedupe_transform,
    sequences.rotate,
    sequences.chunks,
    sequences.flatten,
    sequences.sort_records,
    sequences.k_smallest,
    sequences.merge_intervals,
    sequences.bits,
    numbers.stairs,
    numbers.gcd_lcm,
    numbers.digit_sum,
    numbers.sieve,
    numbers.collatz,
    numbers.to_base,
    numbers.harmonic,
    numbers.coin_change,
    numbers.stats,
    structures.group_words,
    structures.invert_dict,
    structures.stack_machine,
    structures.matrix,
    structures.inventory,
    structures.grid_path,
)
"""Every family, drawn uniformly by ``bench.corpus``."""
