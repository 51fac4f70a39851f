"""The emulator: emulated baseline and speculative vLLM endpoints, a test and demo tool (never in
the benchmark Job)."""
