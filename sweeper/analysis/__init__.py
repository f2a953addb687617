"""Analysis of sweep results: statistics, comparison, reports."""
