"""CDK stacks and constructs of the platform."""

from .app import build_app

__all__ = ["build_app"]
