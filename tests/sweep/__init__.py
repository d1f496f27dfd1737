"""The bad-input sweep: every case of ``cases_*.py`` tried as a user would (``python -m plif ...`` in a
fresh process), its outcome sorted by :func:`.run.judge`.

Run all of it from the checkout with ``python -m tests.sweep --jobs 2`` (:mod:`.run` says the
options), or from the suite with ``pytest -m sweep tests/test_sweep.py``; the default suite runs
the judge and one real case only (tests/test_sweep.py).
"""
