"""``specbench predict --rank`` on the default settings: Qwen3-32B on trn2.48xlarge at TP 4, 16, 32 and
64 and on trn2.3xlarge at TP 4, with and without speculation, at the sweep's loads; its structure and
a few values recomputed from the serving model; --out's chart and JSON; refusals; bad input."""

from __future__ import annotations

import json

import pytest

from specbench import cli
from specbench.analysis import serving_model as sm
from specbench.analysis.cost import cost_per_million_tokens

ROW_START = ("trn2.48xlarge", "trn2.3xlarge")


def rank(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(["predict", "--rank", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def blocks(text: str) -> dict[int, list[list[str]]]:
    """Per load, the table's rows split into cells (two spaces or more between cells)."""
    import re

    found: dict[int, list[list[str]]] = {}
    load = None
    for line in text.splitlines():
        m = re.match(r"at (\d+) client\(s\) in flight per server", line)
        if m:
            load = int(m.group(1))
            found[load] = []
        elif load is not None and re.match(r"\s*\d+\s+trn2", line):
            found[load].append(re.split(r"\s{2,}", line.strip()))
    return found


def test_default_ranking_lists_every_allocatable_tp_with_and_without_speculation(capsys):
    code, out, err = rank(capsys)
    assert code == 0 and err == ""
    tables = blocks(out)
    assert sorted(tables) == [1, 4]  # sweep.concurrencies
    for rows in tables.values():
        assert [r[0] for r in rows] == [str(n) for n in range(1, 11)]
        combos = {(r[1], r[3], r[5]) for r in rows}
        expected = {
            (n, tp, s)
            for n, tps in (("trn2.48xlarge", ("4", "16", "32", "64")), ("trn2.3xlarge", ("4",)))
            for tp in tps
            for s in ("baseline", "draft Qwen3-1.7B k=7")
        }
        assert combos == expected
        servers = {(r[1], r[3]): r[4] for r in rows}
        assert servers == {
            ("trn2.48xlarge", "4"): "16",
            ("trn2.48xlarge", "16"): "4",
            ("trn2.48xlarge", "32"): "2",
            ("trn2.48xlarge", "64"): "1",
            ("trn2.3xlarge", "4"): "1",
        }
        assert all(r[9] in ("meets", "may break", "breaks") or r[9].startswith(("may break (", "breaks (")) for r in rows)
        assert all(r[10] in ("yes", "maybe", "no") for r in rows)
    # TP 32 baseline at 4 clients is where the write-up's profile was fitted: 45.0 ms, no range, and its
    # cost is the catalog's $14.56 over the model's tokens/s per node.
    row = next(r for r in tables[4] if r[1] == "trn2.48xlarge" and r[3] == "32" and r[5] == "baseline")
    predicted = sm.predict(sm.WRITEUP_DEPLOYMENT.with_k(0), sm.writeup_profile(), 0.0, 4, sm.Workload(64, 600))
    assert row[6] == "45.0" and row[8] == f"{cost_per_million_tokens(14.56, predicted.tokens_per_s_per_node):.2f}"
    # Other TPs carry the overhead over a range: TP 4 shows one (beta 0 to 1).
    tp4 = next(r for r in tables[4] if r[1] == "trn2.48xlarge" and r[3] == "4" and r[5] == "baseline")
    assert "-" in tp4[6] and "-" in tp4[8]
    assert "refused: none (every candidate fits)" in out
    assert "trn2.3xlarge LNC2 TP4 draft Qwen3-1.7B k=7: weights 15.26 + KV 0.25 (4096 tokens, 2 KV head(s) per rank)" in out
    assert "per-step overheads fitted at TP 32: at TP 4 x (TP/32)^beta, beta in [0, 1], i.e. x 0.125 to 1" in out
    assert "trn2.3xlarge $0.91/node-hour (assumed: trn2.48xlarge's $14.56 scaled per chip" in out
    assert "assumptions (every row):" in out and "2 GiB for scratchpad, DMA rings and collectives (an assumption)" in out


def test_out_writes_the_chart_and_the_json(tmp_path, capsys):
    code, out, _ = rank(capsys, "--out", str(tmp_path / "rank"), "--loads", "4")
    assert code == 0
    assert (tmp_path / "rank" / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = json.loads((tmp_path / "rank" / "ranking.json").read_text())
    assert doc["format"] == "specbench-ranking/1" and [load["concurrency"] for load in doc["loads"]] == [4]
    rows = doc["loads"][0]["rows"]
    assert [r["rank"] for r in rows] == list(range(1, 11)) and rows == sorted(rows, key=lambda r: r["rank"])
    assert all(r["cost_per_million_output_tokens"]["lo"] <= r["cost_per_million_output_tokens"]["hi"] for r in rows)
    highs = [r["cost_per_million_output_tokens"]["hi"] for r in rows]
    assert highs == sorted(highs)
    assert all(r["source"] == "predicted" and r["provenance"].startswith("serving model; profile: ") for r in rows)
    assert f"written: {tmp_path / 'rank' / 'pareto.png'}" in out
    code, out, _ = rank(capsys, "--json", str(tmp_path / "r.json"), "--loads", "4")  # predict's --json: the same document
    assert code == 0 and json.loads((tmp_path / "r.json").read_text()) == doc


def test_candidates_that_cannot_work_are_refused_with_their_numbers(capsys):
    code, out, _ = rank(capsys, "-c", "serving.max_num_seqs=64", "-c", "serving.max_model_len=2048", "--rank-tp", "4,8,16", "--loads", "64")
    assert code == 0
    assert "trn2.48xlarge LNC2 TP4 baseline: does not fit HBM per rank: weights 15.26 + KV 8.00 (131072 tokens" in out
    assert "= 25.44 GiB > 24.00 GiB HBM per logical core" in out
    assert "trn2.48xlarge LNC2 TP8 baseline: TP 8 needs 2 devices; the Neuron scheduler allocates 1, 4, 8, 16" in out
    assert "trn2.3xlarge LNC2 TP16 baseline: TP 16 needs 4 devices" in out
    assert {(r[1], r[3]) for r in blocks(out)[64]} == {("trn2.48xlarge", "16")}


def test_a_fitted_beta_and_prices_are_taken(capsys):
    code, out, _ = rank(
        capsys, "--tp-beta", "0.5", "--rank-price", "trn2.3xlarge=2.235", "--rank-instances", "trn2.3xlarge", "--loads", "4"
    )
    assert code == 0
    (row, _) = blocks(out)[4]
    assert "-" not in row[6] and row[10] in ("yes", "no")  # one beta: points, a definite front
    assert "prices: trn2.3xlarge $2.235/node-hour (--rank-price)" in out
    assert "TP: --tp-beta 0.5,0.5" in out


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--rank-tp", "4,x"], "--rank-tp"),
        (["--rank-lnc", "3"], "--rank-lnc"),
        (["--rank-k", "0"], "--rank-k"),
        (["--tp-beta", "1,0"], "--tp-beta"),
        (["--slo-tpot-ms", "0"], "--slo-tpot-ms"),
        (["--hbm-reserve-gib", "-1"], "--hbm-reserve-gib"),
        (["--rank-instances", "trn1.32xlarge"], "--rank-instances"),
        (["--rank-price", "trn2.3xlarge=abc"], "--rank-price"),
        (["--rank-price", "trn9.xlarge=3"], "--rank-price"),
        (["--rank-price", "trn2.48xlarge=5000"], "--rank-price"),
    ],
)
def test_bad_input_is_one_line_naming_the_flag(capsys, args, flag):
    with pytest.raises(SystemExit) as exit_info:  # argparse's type errors exit from the parser
        code = cli.main(["predict", "--rank", *args])
        raise SystemExit(code)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and flag in err and "Traceback" not in err


def test_ranking_flags_need_rank(capsys):
    assert cli.main(["predict", "--out", "x"]) == 2
    assert capsys.readouterr().err == "specbench: --out needs --rank\n"
    assert cli.main(["predict", "--tp-beta", "0.3"]) == 2
    assert capsys.readouterr().err == "specbench: --tp-beta needs --rank\n"
