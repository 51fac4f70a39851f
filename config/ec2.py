"""Which EC2 instance types exist, and their CPU architecture.

The list is the EC2 API's own enum of instance types: shape ``InstanceType`` in botocore's
``data/ec2/2016-11-15/service-2.json``, at the botocore version constraints.txt pins. It is copied
into ec2_instance_types.json (family -> sizes) because loading the whole EC2 model takes most of a
second; ``python -m config.ec2`` regenerates the copy, and tests/test_config_rules.py fails when it
differs from the installed botocore. A type launched after that botocore release is unknown until
the pin moves.
"""

from __future__ import annotations

import difflib
import json
import re
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).with_name("ec2_instance_types.json")

# aws-cdk-lib's InstanceType.architecture (aws-ec2/lib/instance-types.ts): family, generation,
# capabilities and size; family `a` (first-generation Graviton) or a `g` among the capabilities
# (m7g, c6gn, is4gen, ...) means arm64, anything else x86_64.
_PARTS = re.compile(r"^([a-z]+)(\d{1,2})([a-z-]*)\.([a-z0-9-]+)\Z", re.ASCII)


def from_botocore() -> dict[str, list[str]]:
    """Family -> sizes, in the API model's order, from the installed botocore."""
    import botocore.loaders

    model = botocore.loaders.Loader().load_service_model("ec2", "service-2")
    families: dict[str, list[str]] = {}
    for name in model["shapes"]["InstanceType"]["enum"]:
        family, size = name.split(".", 1)
        families.setdefault(family, []).append(size)
    return families


@lru_cache(maxsize=1)
def _catalog() -> dict:
    return json.loads(DATA.read_text())


def source() -> str:
    return _catalog()["source"]


def instance_types() -> frozenset[str]:
    return frozenset(f"{family}.{size}" for family, sizes in _catalog()["families"].items() for size in sizes)


def exists(name: str) -> bool:
    return name in instance_types()


def close_matches(name: str) -> list[str]:
    """Existing types closest to a misspelt one: sizes of the same family first."""
    family = name.split(".", 1)[0]
    sizes = _catalog()["families"].get(family)
    pool = [f"{family}.{size}" for size in sizes] if sizes else sorted(instance_types())
    return difflib.get_close_matches(name, pool, n=3, cutoff=0.6)


def architecture(name: str) -> str:
    """``arm64`` or ``x86_64`` by aws-cdk-lib's naming rule; ``unknown`` for names it cannot parse."""
    parts = _PARTS.match(name)
    if parts is None:
        return "unknown"
    return "arm64" if parts.group(1) == "a" or "g" in parts.group(3) else "x86_64"


def main() -> None:
    import botocore

    families = from_botocore()
    rows = ",\n".join(f"    {json.dumps(family)}: {json.dumps(sizes)}" for family, sizes in sorted(families.items()))
    origin = f"the EC2 API's InstanceType enum in botocore {botocore.__version__}"
    DATA.write_text(f'{{\n  "source": {json.dumps(origin)},\n  "families": {{\n{rows}\n  }}\n}}\n')


if __name__ == "__main__":
    main()
