"""Prometheus metrics of the API: its own traffic, and the run's headline numbers as gauges."""

from __future__ import annotations

import json

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from azr.services.api.curriculum import Curriculum


class ApiMetrics:
    """One registry per application, so that several apps in one process (tests) never collide."""

    def __init__(self, curriculum: Curriculum) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "azr_api_requests", "Requests answered.", ["method", "route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "azr_api_request_seconds",
            "Time to answer a request, in seconds.",
            ["method", "route"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10),
            registry=self.registry,
        )
        self.seeds = Counter(
            "azr_api_seeds", "Seeds submitted, by outcome.", ["outcome"], registry=self.registry
        )
        self.registry.register(_RunCollector(curriculum))


class _RunCollector(Collector):
    """Gauges read from the last statistics snapshot (no Redis call at scrape time)."""

    def __init__(self, curriculum: Curriculum) -> None:
        self._curriculum = curriculum

    def collect(self) -> list[GaugeMetricFamily]:
        if not self._curriculum.snapshot_json:
            return []
        stats = json.loads(self._curriculum.snapshot_json)
        version = GaugeMetricFamily("azr_policy_version", "Latest published policy version.")
        version.add_metric([], stats["policy_version"])
        step = GaugeMetricFamily("azr_step", "Latest training step with metrics.")
        step.add_metric([], stats["latest_step"] if stats["latest_step"] is not None else -1)
        tasks = GaugeMetricFamily("azr_buffer_tasks", "Tasks in the buffers.", labels=["type", "origin"])
        for task_type, buffer in stats["buffers"].items():
            for origin, n in buffer["by_origin"].items():
                tasks.add_metric([task_type, origin], n)
        return [version, step, tasks]
