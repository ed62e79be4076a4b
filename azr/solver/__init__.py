"""The solver role: prompts that pose tasks, parsing of answers, and the solve reward."""
