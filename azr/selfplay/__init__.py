"""The self-play loop as plain code over protocols: no Ray, no Redis.

- ``round``: one propose / validate / learnability / solve / check round, turned into experiences;
- ``seeding``: the seeding stage that fills the buffers before training;
- ``learner``: the learner's fixed order of work (train, acknowledge, publish, checkpoint);
- ``schedule``: the steps, synchronous or with a bounded policy lag (``max_staleness``);
- ``protocols``: what the loop needs from the executor, the samplers, the store and the learner.

``azr.services`` adapts Ray actors, Redis and the executor service to these protocols.
"""
