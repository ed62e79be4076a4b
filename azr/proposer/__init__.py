"""The proposer role: prompts that ask for new tasks, parsing of proposals, and the learnability reward."""
