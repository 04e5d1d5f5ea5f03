"""The workflow under test: ask the fixture for an answer to request.json.

Run from this folder: ``python run.py``. It records an owner-only inspection record,
``run.inspection.jsonl``, with a line for every hit, so ``replay-actor coverage`` can
tell which entries the run used.
"""

import json
import sys

from replay_actor import ReplayMiss, acquire

with open("request.json", encoding="utf-8") as handle:
    request = json.load(handle)

with acquire(
    "fixture.jsonl", inspection_path="run.inspection.jsonl", inspection_served=True
) as llm:
    try:
        answer = llm.complete(request)
    except ReplayMiss as miss:
        print(f"ReplayMiss: {miss}")
        sys.exit(1)
print(answer["content"])
