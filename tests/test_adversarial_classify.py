"""The adversarial harness's classifier (scripts/adversarial.py ``classify``): what counts as a clean
answer to a hostile input, and which kind of unclean answer it is. Pure: no command is run."""

from __future__ import annotations

from scripts import adversarial as adv

REFUSE_PRICE = adv.refused("--node-price-per-hour")
PLAIN = adv.Outcome(0, "deployment: ...\n- left out: KV-cache reads\nreport: /tmp/x/out/report.md\n", "")


def test_a_one_line_refusal_naming_the_flag_is_clean():
    out = adv.Outcome(2, "", "specbench: --node-price-per-hour nan: expected a finite number from 0 to 1000\n")
    assert adv.classify(REFUSE_PRICE, out) == adv.CLEAN


def test_a_refusal_that_does_not_name_the_flag_or_runs_long_is_unclear():
    assert adv.classify(REFUSE_PRICE, adv.Outcome(2, "", "specbench: invalid literal for int() with base 10: 'abc'\n")) == adv.UNCLEAR
    many = "".join(f"--node-price-per-hour line {i}\n" for i in range(adv.MAX_REFUSAL_LINES + 1))
    assert adv.classify(REFUSE_PRICE, adv.Outcome(2, "", many)) == adv.UNCLEAR
    assert adv.classify(REFUSE_PRICE, adv.Outcome(2, "", "")) == adv.UNCLEAR


def test_names_and_markers_match_whatever_the_case():
    assert (
        adv.classify(adv.refused("results.node_price_per_hour"), adv.Outcome(2, "", "Results.Node_Price_Per_Hour=-1: bad\n")) == adv.CLEAN
    )


def test_a_traceback_or_the_clis_unexpected_line_is_a_traceback_whatever_the_exit_code():
    trace = "Traceback (most recent call last):\n  File ...\nKeyError: 'spec'\n"
    assert adv.classify(REFUSE_PRICE, adv.Outcome(2, "", trace + "--node-price-per-hour")) == adv.TRACEBACK
    assert adv.classify(adv.OKAY, adv.Outcome(1, "", "specbench: unexpected AttributeError: 'list' object\n")) == adv.TRACEBACK
    assert adv.classify(adv.OKAY, adv.Outcome(0, "fine", "specbench: unexpected RecursionError: maximum depth\n")) == adv.TRACEBACK


def test_no_answer_within_the_timeout_is_a_hang():
    assert adv.classify(adv.OKAY, adv.Outcome(None, "partial", "")) == adv.HANG
    assert adv.first_line(adv.Outcome(None, "", "")) == "(timed out)"


def test_exit_0_where_a_refusal_was_due_is_wrong_but_fine_and_another_code_is_not_refused():
    assert adv.classify(REFUSE_PRICE, adv.Outcome(0, "price: $-1.00/node-hour\n", "")) == adv.WRONG_BUT_FINE
    assert adv.classify(REFUSE_PRICE, adv.Outcome(1, "", "cannot read the caller's identity\n")) == adv.NOT_REFUSED


def test_a_flag_must_be_news_against_the_valid_inputs_answer():
    expect = adv.either(("--from-run",), ("left out", "settings"))
    # "left out" is in every prediction's assumptions: not a flag.
    assert adv.classify(expect, PLAIN, PLAIN) == adv.WRONG_BUT_FINE
    flagged = adv.Outcome(0, PLAIN.stdout + "run r has no settings snapshot: its k assumed from -c\n", "")
    assert adv.classify(expect, flagged, PLAIN) == adv.CLEAN
    # A word inside a path (an output folder named after the case) is not a flag.
    in_path = adv.Outcome(0, PLAIN.stdout + "written: /tmp/fx/out/from-run-without-settings/p.json\n", "")
    assert adv.classify(expect, in_path, PLAIN) == adv.WRONG_BUT_FINE


def test_either_accepts_a_clean_refusal_and_flagged_accepts_a_refusal_naming_a_marker():
    expect = adv.either(("--from-run",), ("settings",))
    assert adv.classify(expect, adv.Outcome(2, "", "specbench: --from-run r: no settings snapshot\n"), PLAIN) == adv.CLEAN
    assert adv.classify(adv.flagged("skipped"), adv.Outcome(2, "", "specbench: skipped every record\n"), PLAIN) == adv.CLEAN
    assert adv.classify(adv.flagged("skipped"), adv.Outcome(2, "", "specbench: no\n"), PLAIN) == adv.UNCLEAR


def test_a_valid_input_must_exit_0():
    assert adv.classify(adv.OKAY, PLAIN) == adv.CLEAN
    assert adv.classify(adv.OKAY, adv.Outcome(2, "", "specbench: --sweep-id sw: no such sweep\n")) == adv.FALSE_REFUSAL
    assert adv.classify(adv.OKAY, adv.Outcome(4, "", "endpoints never ready\n")) == adv.NOT_REFUSED


def test_the_table_counts_each_command_and_the_total():
    rows = [
        {"command": "plan", "result": adv.CLEAN},
        {"command": "plan", "result": adv.WRONG_BUT_FINE},
        {"command": "predict", "result": adv.TRACEBACK},
    ]
    lines = adv.table(rows).splitlines()
    assert lines[2] == "| plan | 2 | 1 | 1 | 0 | 0 | 1 | 0 | 0 | 0 |"
    assert lines[3] == "| predict | 1 | 0 | 1 | 1 | 0 | 0 | 0 | 0 | 0 |"
    assert lines[4] == "| total | 3 | 1 | 2 | 1 | 0 | 1 | 0 | 0 | 0 |"


def test_unclean_cases_are_grouped_by_the_issues_causes():
    assert adv.cause_of("sweep-stage-job:kind-deployment").startswith("stage-job input")
    assert adv.cause_of("sweep-next:sweep-id-dotdot").startswith("unsafe ids")
    assert adv.cause_of("predict:from-sweep-foreign").startswith("sweep points not checked")
    assert adv.cause_of("app.py:price--1").startswith("cost inputs")
    assert adv.cause_of("predict:loads-abc") == "other values of a flag or setting"


def test_the_programs_own_name_names_nothing():
    job_fields = adv.refused("stdin", "kind", "spec", "the job")
    assert adv.classify(job_fields, adv.Outcome(2, "", "specbench: sweep stage-job: Expecting value: line 1 column 1\n")) == adv.UNCLEAR
    assert adv.classify(job_fields, adv.Outcome(2, "", "specbench: sweep stage-job: stdin: not JSON\n")) == adv.CLEAN
