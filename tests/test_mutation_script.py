"""scripts/mutation.py's reading of mutmut's JUnit report (`make mutation`): which mutants mutmut left
untested or survived, to be run again one by one (mutmut 2.5.1 never queues a mutant on a line
repeating an earlier one)."""

from __future__ import annotations

import tomllib

from scripts.mutation import TABLE, unsettled_ids

# The shape mutmut 2.5.1's `junitxml --untested-policy failure` prints (mutmut/cache.py,
# create_junitxml_report): a failure whose message is the status, for survived and untested mutants.
REPORT = """<?xml version="1.0" ?>
<testsuites disabled="0" errors="0" failures="3" tests="4" time="0.0">
  <testsuite disabled="0" errors="0" failures="3" name="mutmut" skipped="0" tests="4" time="0">
    <testcase name="Mutant #1" file="m.py" line="3"><system-out>x = 1</system-out></testcase>
    <testcase name="Mutant #2" file="m.py" line="5"><failure type="failure" message="bad_survived">diff</failure></testcase>
    <testcase name="Mutant #191" file="m.py" line="215"><failure type="failure" message="untested">diff</failure></testcase>
    <testcase name="Mutant #193" file="m.py" line="235"><failure type="failure" message="untested">diff</failure></testcase>
  </testsuite>
</testsuites>
"""


def test_untested_and_surviving_mutants_are_found_by_id_and_killed_ones_are_not():
    assert unsettled_ids(REPORT) == ["2", "191", "193"]
    assert unsettled_ids(REPORT.replace('message="untested"', 'message="bad_timeout"')) == ["2"]


def test_every_target_has_a_minimum_and_stages_of_existing_test_files():
    table = tomllib.loads(TABLE.read_text())
    root = TABLE.parents[1]
    for module, target in table["targets"].items():
        assert (root / module).is_file(), module
        assert 0 < target["minimum"] <= 100, module
        for stage in target["tests"]:
            assert all((root / a.split("::")[0]).is_file() for a in stage if a.startswith("tests/")), (module, stage)
    for entry in table["equivalent"]:
        assert entry["module"] in table["targets"] and entry["reason"], entry
