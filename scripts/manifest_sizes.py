"""Print the size of every manifest the cluster's kubectl provider applies, against its budget.

    python scripts/manifest_sizes.py [CDK_OUT]     (make manifest-sizes: synthesizes first)

The kubectl provider passes a manifest to its Lambda inline, and an update sends the old and the new
one in the same event: 256 KiB of payload (REFERENCE.md section 3, aws/aws-cdk issues
19165 and 31902), so each manifest gets a quarter of it. Exit 1 when one is over; 2 when there is no
synthesized template to read. No code rides in a manifest (the pods fetch theirs from S3), so these
sizes do not grow with the package (tests/test_code_asset.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"
PAYLOAD_LIMIT = 256 * 1024
BUDGET = PAYLOAD_LIMIT // 4


def manifest_sizes(template: dict[str, Any]) -> dict[str, int]:
    """Logical id -> bytes of the Manifest property (as the template holds it) of each manifest."""
    return {
        lid: len(json.dumps(r["Properties"]["Manifest"]))
        for lid, r in sorted(template.get("Resources", {}).items())
        if r.get("Type") == MANIFEST
    }


def report(templates: dict[str, dict[str, Any]]) -> tuple[list[str], bool]:
    """One line per manifest of each template; whether every one is within BUDGET."""
    lines, fits = [], True
    for name, template in sorted(templates.items()):
        for lid, size in manifest_sizes(template).items():
            over = size > BUDGET
            fits &= not over
            lines.append(f"{name} {lid}: {size:,} bytes, {size / BUDGET:.1%} of the {BUDGET:,}-byte budget{' OVER' if over else ''}")
    return lines, fits


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "cdk.out")
    paths = sorted(out.glob("*.template.json"))
    if not paths:
        print(f"manifest-sizes: no *.template.json in {out}: run `make synth` first", file=sys.stderr)
        return 2
    lines, fits = report({p.name.removesuffix(".template.json"): json.loads(p.read_text()) for p in paths})
    print("\n".join(lines) if lines else f"no {MANIFEST} in {out}")
    return 0 if fits else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
