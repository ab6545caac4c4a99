"""PerRecBench's report: its tables, analyses, plots and page (the leaderboard of its runs)."""
