"""Analysis: statistics, the speculative-decoding model, draft acceptance and a run's summary; pure
functions of stored records (standard library only)."""
