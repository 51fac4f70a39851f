"""The aggregation Lambda (handler.py); see stacks/results.py for how it is deployed."""
