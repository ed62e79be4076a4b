"""Pieces shared by the proposer and solver roles: completion scanning, prompt wrapping, format shaping.

The two roles must not import each other; what both need lives here, once. Everything is text in, text
out: no model, no executor run, no I/O.
"""
