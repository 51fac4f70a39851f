"""Synthesize the app with every project acknowledgment switched off (run by the tests in a
background process): ``synth_unacknowledged.py --outdir DIR [-c KEY=VALUE ...]``.

Synth is expected to fail cdk-nag's validation (exit 3); the templates are still written, and the
validation report lists every finding the acknowledgments would have silenced."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aws_cdk import App  # noqa: E402

import app as entry  # noqa: E402
import stacks.nag  # noqa: E402
import stacks.storage  # noqa: E402
from config import load_config  # noqa: E402
from stacks import build_app  # noqa: E402


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--outdir", required=True)
    parser.add_argument("-c", dest="context", action="append", default=[])
    args = parser.parse_args(argv)
    outdir, overrides = args.outdir, args.context
    stacks.nag.acknowledge = lambda *args, **kwargs: None
    stacks.storage.acknowledge = lambda *args, **kwargs: None
    context = entry.direct_run_context()
    context.update(item.split("=", 1) for item in overrides)
    application = App(context=context, outdir=outdir)
    build_app(application, load_config(application.node.get_all_context(), {}))
    try:
        application.synth()
    except RuntimeError as err:
        if "ValidationFailed" in str(err):
            return 3  # the expected outcome
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
