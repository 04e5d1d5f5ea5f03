"""attribution/: the run log and compare."""
