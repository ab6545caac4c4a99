"""PerRecBench's builder: groups of users who rated one item, levels easy/medium/hard, the test/train split,
and the config × split parquet files with their statistics and dataset card."""
