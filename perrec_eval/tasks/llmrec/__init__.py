"""LLMRec's five tasks as a family of the house (`task.TASK`)."""
