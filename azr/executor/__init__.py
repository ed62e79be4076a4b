"""The sandboxed executor: the only source of ground truth in self-play (standard library only)."""
