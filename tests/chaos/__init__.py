"""The chaos suite: the whole pipeline deployed as real processes, faults injected at seeded
random moments, and an outside count of what came out (``make chaos``; a reduced set of
scenarios runs inside ``make test`` as ``tests/chaos/test_chaos.py``).

Layout: ``world`` deploys the pipeline, ``faults`` and ``bad_input`` break it, ``observer``
counts the announcements, ``accounting`` counts everything else from the registry, the bucket
and the edge journal, ``runner`` plays one scenario, ``checks`` and ``scenarios`` say what each
scenario must show, ``reliability_doc`` writes the table into docs/reliability.md, and
``__main__`` is ``python -m tests.chaos``.
"""
