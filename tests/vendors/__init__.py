"""vendors/: every vendor wire shape <-> neutral; the files here span families."""
