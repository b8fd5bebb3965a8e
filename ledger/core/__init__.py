"""The pure core: events, decision rules, statistics, the round path and the projection folds.

Values in, values out. Nothing here reads a file, a database, the network or the clock;
tests/unit/test_boundaries.py holds every module of this package to that.
"""
