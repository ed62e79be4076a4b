"""The vocabulary every layer shares: task types, roles, origins, tasks and experiences.

``azr.core.task`` is standard library only, so the sandboxed executor can import it; ``azr.core.experience``
adds numpy for the token arrays. Nothing here imports another ``azr`` package.
"""
