"""authoring/: explain, add, coverage, and a miss explained."""
