"""The REST API and live dashboard of a self-play run (``azr api``).

Seeds in (validated by the executor), tasks and curriculum statistics out, over the run's Redis store;
the dashboard at ``/`` follows the run through server-sent events. Build the app with
``azr.services.api.app.create_app``.
"""
