"""One router per resource: seeds, tasks, stats, runs, health, and the dashboard's pages."""
