"""The package as a whole: its public names, its layers and maps, one contract for
every provider."""
