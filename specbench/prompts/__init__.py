"""Prompts: the test-case suites (built-in ones in suites/) and how a prompt is filled."""
