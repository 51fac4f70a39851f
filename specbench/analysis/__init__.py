"""Analysis: statistics, the speculative-decoding model, draft acceptance and a run's summary; pure
functions of what was measured (stats, theory and aggregate are standard library only: the
aggregation Lambda ships them)."""
