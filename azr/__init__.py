"""AZR: an Absolute Zero reasoner service.

One language model plays two roles: as proposer it writes Python tasks, as solver it answers them. A
sandboxed executor is the only source of ground truth. Packages, lowest layer first:

- ``azr.executor``: the sandbox, task model, static gate and value comparison (stdlib only).
- ``azr.proposer`` / ``azr.solver``: prompts, parsing and rewards of each role (text in, text out).
- ``azr.trainer``: advantage estimators, losses, models and training engines (sees only experiences).
- ``azr.services``: configuration, Redis, Ray actors, the REST API, the dashboard and the CLI.
"""

__version__ = "0.1.0"
