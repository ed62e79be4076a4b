"""Ray actors around the self-play pieces: rollout workers, the executor, the learner; and the driver.

Every actor is restartable: Ray restarts a dead actor (``max_restarts=-1``) and re-issues the call it
was serving (``max_task_retries=-1``). A restarted rollout worker loads the newest published weights; a
restarted learner resumes from its last checkpoint and recovers the experiences it held.
"""
