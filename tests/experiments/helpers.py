"""Helpers of the experiments' tests (shared ones live in tests/plif_testing.py)."""
from plif_testing import assert_real_png, shared_dir  # noqa: F401  (imported from here by these tests)
