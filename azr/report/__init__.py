"""``azr report``: learning curves of self-play runs, drawn from their ``metrics.jsonl``."""
