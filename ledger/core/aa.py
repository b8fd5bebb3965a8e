"""How many A/A pairs a drift estimate needs, and the one sentence that says it: the flag's
glossary, `noise --help`, `noise`'s output and the decision text all use it. Free of numpy, so
the command line can word it without loading the statistics."""

MIN_DRIFT_PAIRS = 5
FLAG_DRIFT_UNESTIMATED = "drift_unestimated"  # a decision's flag: fewer pairs than that
DRIFT_PAIRS_RULE = (
    f"a drift estimate needs {MIN_DRIFT_PAIRS} A/A pairs; each `noise` remeasure of a kernel "
    "pairs with that kernel's measurement before it (baseline, round or remeasure), so "
    f"{MIN_DRIFT_PAIRS} `noise` calls of one kernel give {MIN_DRIFT_PAIRS} pairs, usable where "
    "both sides have min_samples samples per case"
)
