"""``azr eval``: solver accuracy of a checkpoint on a task suite, judged by the executor."""
