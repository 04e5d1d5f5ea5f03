"""What the tests share, in one place: loopback servers speaking each vendor's wire,
the front door's and the processes' helpers, and the soak run (``python -m
tests.support.soak``). Test modules import helpers from here, never from each other."""
