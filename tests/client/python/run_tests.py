"""Runs one test module for CTest: verbose unittest output (skips are listed
with their reason), exit 1 on any failure, and exit 77 -- CTest's
SKIP_RETURN_CODE here -- when every test of the module was skipped, so that a
module that could not run at all (no GPU, no torch) shows as Skipped rather
than Passed.

    python3 run_tests.py test_client [-k pattern]
"""

import sys
import unittest

SKIPPED_EXIT_CODE = 77


def main(argv):
    if len(argv) < 2:
        print(f"usage: {argv[0]} <module> [-k pattern]", file=sys.stderr)
        return 2
    loader = unittest.TestLoader()
    if len(argv) >= 4 and argv[2] == "-k":
        loader.testNamePatterns = [f"*{argv[3]}*"]
    suite = loader.loadTestsFromName(argv[1])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if not result.wasSuccessful():
        return 1
    if result.testsRun > 0 and len(result.skipped) == result.testsRun:
        return SKIPPED_EXIT_CODE
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
