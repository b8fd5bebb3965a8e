"""Valid at the first try: every input file of a campaign written from `kernel-ledger
template KIND` alone (notes dropped; only the values a user must supply replaced: the
sha256 digests, the baseline manifest's kernel, raw samples, a profile) runs plan, profile,
record, noise and analyze, on SQLite and PostgreSQL."""

from __future__ import annotations

from template_kit import digest, from_template, put, validation


def test_a_campaign_from_the_templates_alone(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    put("kernels/kernel_v0.py", "# v0\nBLOCK = 128\n")
    put("kernels/kernel_r1.py", "# r1\nBLOCK = 256\n")

    config = from_template(cli, "config")
    validation(cli, "validation/baseline", "kernels/kernel_v0.py", "softmax-001-baseline")
    config["baseline"][0] = {
        "case_id": "fp16-1024x1024",
        "samples_us": [52.0 + i * 0.01 for i in range(20)],
    }
    put("config.json", config)
    planned = cli("plan", "--config", "config.json", "--json")
    assert planned.exit_code == 0, planned.stderr
    assert planned.json()["warnings"] == []

    result = from_template(cli, "round")
    validation(cli, "validation/round-1", "kernels/kernel_r1.py", "softmax-001-round-1")
    result["parent_kernel_sha256"] = digest("kernels/kernel_v0.py")
    result["measurements"][0]["samples_us"] = [47.9 + i * 0.01 for i in range(20)]
    result["measurements"][0]["median_us"] = 47.9 + 9.5 * 0.01
    put("profiles/baseline.json", {"occupancy": 0.4, "duration_us": 52.0})
    baseline = cli(
        "profile", "profiles/baseline.json", "--run", "softmax-001", "--baseline",
        "--case", "fp16-1024x1024",
    )  # fmt: skip
    assert baseline.exit_code == 0, baseline.stderr
    put("profiles/round-1.json", {"occupancy": 0.6, "duration_us": 48.0})
    result["profile"] = {"file": "profiles/round-1.json", "case": "fp16-1024x1024"}
    result["expected_signal"] = {"metric": "occupancy", "direction": "increase"}
    put("round-1.json", result)
    recorded = cli("record", "--run", "softmax-001", "--result", "round-1.json", "--json")
    assert recorded.exit_code == 0, recorded.stderr
    assert recorded.json()["decision"] == "KEEP"
    shown = cli("show", "--run", "softmax-001", "--round", "1", "--json").json()
    assert shown["decision"]["mechanism_check"]["confirmed"] is True

    aa = from_template(cli, "measurements")
    aa["kernel_sha256"] = digest("kernels/kernel_r1.py")
    put("aa.json", aa)
    noise = cli("noise", "--run", "softmax-001", "--measurements", "aa.json", "--json")
    assert noise.exit_code == 0, noise.stderr

    analyzed = cli("analyze", "--run", "softmax-001", "--output-dir", "out", "--json")
    assert analyzed.exit_code == 0, analyzed.stderr
    assert cli("verify").exit_code == 0


def test_a_decide_input_from_its_template(cli, tmp_path):
    put(str(tmp_path / "decide.json"), from_template(cli, "decide"))
    result = cli("decide", "--input", tmp_path / "decide.json", "--json", db=False)
    assert result.exit_code == 0, result.stderr
    assert result.json()["decision"] == "NOISE"
