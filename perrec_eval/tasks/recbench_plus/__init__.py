"""RecBench+ as a task family: a user's natural-language query with conditions → a list of recommended
titles, matched to the catalogue and scored by recall, precision, NDCG, condition match, hallucination and
FTR (`task.py`)."""
