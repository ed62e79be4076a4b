"""Prometheus metrics of the executor service, in a registry of its own (one per application)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from azr.executor.jobs import Job, JobOp, JobResult

_LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def outcome_label(job: Job, result: JobResult) -> str:
    """One word per result: the error class when there is one, else valid / correct / wrong."""
    if result.error is not None:
        return result.error.code.value
    if job.op is JobOp.VALIDATE:
        return "valid"
    return "correct" if result.correct else "wrong"


class _PoolCollector(Collector):
    """Reads the sandbox pool's counters at scrape time."""

    def __init__(self, read: Callable[[], Mapping[str, int] | None]) -> None:
        self._read = read

    def collect(self) -> Iterator[GaugeMetricFamily]:
        stats = self._read() or {}
        for name, value in sorted(stats.items()):
            family = GaugeMetricFamily(
                f"azr_executor_pool_{name}", f"Sandbox pool: {name.replace('_', ' ')}."
            )
            family.add_metric([], float(value))
            yield family


class ServiceMetrics:
    def __init__(self, pool_stats: Callable[[], Mapping[str, int] | None]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.jobs = Counter(
            "azr_executor_jobs",
            "Jobs finished, by operation, task type and outcome (error class or valid/correct/wrong).",
            ["op", "type", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "azr_executor_job_latency_seconds",
            "Time the executor spent judging a job, queueing excluded.",
            ["op"],
            buckets=_LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.pending = Gauge(
            "azr_executor_pending_jobs", "Jobs admitted and not yet finished.", registry=self.registry
        )
        self.refused = Counter(
            "azr_executor_refused_batches",
            "Batches refused by backpressure (429) or while not ready (503).",
            ["reason"],
            registry=self.registry,
        )
        self.registry.register(_PoolCollector(pool_stats))

    def observe(self, job: Job, result: JobResult) -> None:
        self.jobs.labels(job.op.value, job.task.type.value, outcome_label(job, result)).inc()
        self.latency.labels(job.op.value).observe(result.elapsed_ms / 1000)
