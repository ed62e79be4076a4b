"""The zero-human-data warm start: program families, executor-labelled examples of both roles, supervised
training of the tiny model (``azr pretrain``)."""
