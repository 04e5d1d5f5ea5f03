"""replay/forked/: the processes forked off (the zygote, the holders, the actor)."""
