"""The core: I/O-free, runs wherever it is imported (the caller and the actor alike).

It imports nothing of ``caller/``, ``forked/`` or ``io/``: no socket, no process, no
clock it does not take as an argument.

::

    protocol.py     any      config, opcodes, frame, split_frames, decode_reply
    state.py        any      HandleState and every lifecycle message, no I/O
    control.py      any      the control messages to the zygote and holders, and replies

This ``__init__`` imports nothing.
"""
