"""Prompts: the test-case suites (built-in ones in suites/), how a prompt is filled, and the pinned
dataset sources a suite may draw its prompts from (datasets.py; offline fixtures in fixtures/)."""
