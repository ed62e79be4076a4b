"""The executor as an HTTP service: batches of jobs in, results streamed (NDJSON) or polled out.

``app`` builds the FastAPI application around an ``ExecutorPool``; ``client`` is ``ExecutorClient``, which
offers the pool's Python API (``validate``/``check``/``submit``/``map``) over HTTP.
"""
