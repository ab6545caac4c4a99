"""RecBench+ (issue 26): recommendation-assistant queries built from an item knowledge graph of the Amazon
Reviews 2023 metadata. `kg` makes the graph, `queries` the conditions, ground truth and phrasing, `builder`
the benchmark folder."""
