"""replay/caller/: the acquiring process's side (async, pipelines, faults, Ray)."""
