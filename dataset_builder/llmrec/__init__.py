"""LLMRec's five recommendation tasks (rating, sequential, direct so far) built from Amazon Reviews 2023."""
