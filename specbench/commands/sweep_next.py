"""``specbench sweep next`` (one step of a staged sweep: it reads config/) and ``sweep stage-job``
(the next stage's Job, a filter between ``kubectl create job`` and ``kubectl apply``): a laptop's
steps, so neither is in the pods' zip (commands/sweep.py imports this module only when one is chosen)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specbench.commands import EXIT_USAGE
from specbench.commands.checkout import checkout_config
from specbench.jsonfile import dumps as jsonfile_dumps


def command_stage_job(args: argparse.Namespace) -> int:
    """``sweep stage-job``: the CronJob's Job JSON (stdin) made into the stage's Job (stdout)."""
    import json

    from botocore.exceptions import BotoCoreError, ClientError

    from specbench.outputs import sweep_next

    def parsed(text: str, where: str) -> object:
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"{where}: not JSON ({error.msg} at line {error.lineno} column {error.colno})") from None
        except RecursionError:  # json nests one Python call per level
            raise ValueError(f"{where}: nested too deeply to be a Job or a stage document") from None

    try:
        try:
            text = _read_location(args.stage, args.region)
        except OSError as error:
            raise ValueError(f"--stage {args.stage}: cannot be read ({error.strerror or error})") from None
        doc = parsed(text, f"--stage {args.stage}")
        job = parsed(sys.stdin.read(), "stdin")
        print(jsonfile_dumps(sweep_next.stage_job(job, doc), indent=2))
    except (OSError, ValueError, BotoCoreError, ClientError) as error:
        print(f"specbench: sweep stage-job: {error}", file=sys.stderr)
        return EXIT_USAGE
    return 0


def command_next(args: argparse.Namespace) -> int:
    """``sweep next``: decide at every load from the stored points; print and store the next stage."""
    from specbench.outputs import sweep_next

    config = checkout_config(args)
    if isinstance(config, int):
        return config
    from config.sweep_decision import decision_settings
    from specbench.outputs import sweep_controller as controller
    from specbench.outputs.sweep_report import load_sweep_folders
    from specbench.results.store import open_store

    if not config.sweep.variants:
        print("specbench: sweep next: no sweep configured (sweep.variants is empty)", file=sys.stderr)
        return EXIT_USAGE
    # The same Inputs the in-cluster controller reads from its settings.json (one source for both).
    inputs = controller.inputs_from_settings(decision_settings(config, args.node_price_per_hour))
    try:
        store = open_store(args.results, args.region)
        folders = load_sweep_folders(store, args.sweep_id)
        if not folders:
            where = f"{store.location.rstrip('/')}/sweeps/{args.sweep_id}/"
            raise sweep_next.NextError(f"no sweep point stored under {where} (--sweep-id {args.sweep_id})")
        _, doc, location = sweep_next.advance(store, folders, args.sweep_id, inputs, args.resamples)
    except (OSError, ValueError) as error:
        print(f"specbench: sweep next: {error}", file=sys.stderr)
        return EXIT_USAGE
    print(sweep_next.render(doc))
    print(f"stored: {location}")
    return 0


def _read_location(location: str, region: str | None) -> str:
    """A file's text from a path or an s3:// URL."""
    if location.startswith("s3://"):
        from specbench.results.store import open_store

        folder, _, name = location.rpartition("/")
        return open_store(folder + "/", region).read_text(name)
    return Path(location).read_text(encoding="utf-8")
