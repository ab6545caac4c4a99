"""LLMRec's tasks as a family of the house: rating, sequential and direct recommendation (`task.TASK`)."""
