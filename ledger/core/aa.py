"""How many A/A pairs a drift estimate needs, and the one sentence that says it: the flag's
glossary, `noise --help`, `noise`'s output and the decision text all use it. Free of numpy, so
the command line can word it without loading the statistics."""

MIN_DRIFT_PAIRS = 5
DRIFT_PAIRS_RULE = (
    f"a drift estimate needs {MIN_DRIFT_PAIRS} A/A pairs (two remeasures of one kernel, each "
    "with min_samples samples per case)"
)
