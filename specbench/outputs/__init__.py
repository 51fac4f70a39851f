"""Outputs: what a run is published as: CloudWatch metrics, the dashboard and the report."""
