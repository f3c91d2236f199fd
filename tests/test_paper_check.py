"""The hub-config reader: every report-stated field of a config.json is checked against the paper
configuration, and each mismatch is reported by field."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pybridge.errors import ConfigError
from pybridge.paper_check import REPORT_FIELDS, VISION_FIELDS, VISION_PARAMETERS, check_config

REPO = Path(__file__).resolve().parents[1]
PAPER = REPO / "fixtures" / "paper" / "config.json"


def _write(tmp_path: Path, raw: dict, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(raw))
    return path


def _paper() -> dict:
    return json.loads(PAPER.read_text())


def test_paper_fixture_has_no_mismatch():
    result = check_config(PAPER)
    assert result.mismatches == [] and result.wf_problems == []
    assert result.checked == len(REPORT_FIELDS) + len(VISION_FIELDS) + 1  # + the parameter count
    assert result.vision_unchecked is None
    assert "vocab_size" in result.unverifiable and "q_lora_rank" in result.unverifiable
    # vision: only the sub-fields the report does not state, never the whole `vision_config`
    vision = _paper()["vision_config"]
    unstated = {f"vision_config.{k}" for k in vision} - set(VISION_FIELDS)
    assert "vision_config" not in result.unverifiable
    assert unstated and unstated <= set(result.unverifiable)
    assert not set(VISION_FIELDS) & set(result.unverifiable)


def test_report_numbers_in_the_paper_fixture():
    """Independent of the reader: the numbers k3-spec §1 gives, read straight from the fixture."""
    raw = _paper()
    assert (raw["hidden_size"], raw["num_hidden_layers"], raw["num_attention_heads"]) == (7168, 93, 96)
    assert (raw["kv_lora_rank"], raw["qk_rope_head_dim"], raw["qk_nope_head_dim"], raw["v_head_dim"]) == (512, 64, 128, 128)
    assert (raw["num_experts"], raw["num_experts_per_token"], raw["num_shared_experts"]) == (896, 16, 2)
    assert (raw["moe_intermediate_size"], raw["routed_expert_hidden_size"], raw["attn_res_block_size"]) == (3072, 3584, 12)
    lac = raw["linear_attn_config"]
    assert len(lac["kda_layers"]) == 69 and len(lac["full_attn_layers"]) == 24
    assert lac["full_attn_layers"][-2:] == [92, 93]
    assert raw["num_attention_heads"] * (128 + 64 + 128) * 3 == (512 + 64) * 160


def test_each_mismatch_is_reported_by_field(tmp_path):
    raw = _paper()
    raw["hidden_size"] = 7000
    raw["num_experts_per_token"] = 8
    raw["activation_situ_linear_beta"] = 20.0
    del raw["kv_lora_rank"]
    raw["linear_attn_config"]["gate_lower_bound"] = -4.0
    raw["vocab_size"] = 12345  # not stated in the report: never a mismatch
    path = _write(tmp_path, raw)
    result = check_config(path)
    fields = {m.field for m in result.mismatches}
    assert fields == {
        "hidden_size",
        "num_experts_per_token",
        "activation_situ_linear_beta",
        "kv_lora_rank",
        "linear_attn_config.gate_lower_bound",
    }
    messages = [m.message(result.path) for m in result.mismatches]
    assert f"{path}: field 'hidden_size' is 7000; the K3 report has 7168 (Table 1: hidden dim 7,168)" in messages
    assert any("field 'kv_lora_rank' is missing; the K3 report has 512" in m for m in messages)
    assert any("'linear_attn_config.gate_lower_bound' is -4.0; the K3 report has -5.0 (Eq. 5" in m for m in messages)


def test_well_formedness_problems_name_the_field(tmp_path):
    """Lean's `Config.WF` at MX block 32: misaligned MX widths are listed one by one; a field the
    loader rejects (a zero epsilon) is named; the CLI fails on them."""
    raw = _paper()
    raw["moe_intermediate_size"] = 3000
    raw["intermediate_size"] = 33800
    result = check_config(_write(tmp_path, raw))
    assert result.wf_problems == [
        "field 'moe_intermediate_size' must be a multiple of the MX block 32, got 3000",
        "field 'intermediate_size' must be a multiple of the MX block 32, got 33800",
    ]
    raw = _paper()
    raw["linear_attn_config"]["l2_norm_eps"] = 0.0
    (problem,) = check_config(_write(tmp_path, raw, "eps.json")).wf_problems
    assert problem == "field 'linear_attn_config.l2_norm_eps' must be positive, got 0.0"
    bad = subprocess.run([sys.executable, "-m", "pybridge", "check-config", str(tmp_path / "eps.json")],
                         capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 1 and "not well formed: field 'linear_attn_config.l2_norm_eps'" in bad.stdout


def test_schedule_mismatch_names_the_layers(tmp_path):
    raw = _paper()
    lac = raw["linear_attn_config"]
    lac["full_attn_layers"] = [n for n in lac["full_attn_layers"] if n != 93] + [91]
    result = check_config(_write(tmp_path, raw))
    (m,) = result.mismatches
    text = m.message(result.path)
    assert "field 'linear_attn_config.full_attn_layers' lists 24 entries, the K3 report 24" in text
    assert "it lacks [93] and has extra [91]" in text


def test_integer_and_float_spellings_agree(tmp_path):
    raw = _paper()
    raw["activation_situ_beta"] = 4  # 4 == 4.0
    raw["linear_attn_config"]["gate_lower_bound"] = -5
    assert check_config(_write(tmp_path, raw)).mismatches == []


def test_boolean_fields_are_not_numbers(tmp_path):
    raw = _paper()
    raw["mla_use_nope"] = 1
    (m,) = check_config(_write(tmp_path, raw)).mismatches
    assert m.field == "mla_use_nope"


def test_multimodal_config_nests_the_text_part(tmp_path):
    raw = {"text_config": _paper(), "vision_config": {"hidden_size": 1152}}
    raw["text_config"]["num_hidden_layers"] = 61
    result = check_config(_write(tmp_path, raw))
    assert {m.field for m in result.mismatches} >= {"text_config.num_hidden_layers"}


def test_folder_and_bad_files(tmp_path):
    _write(tmp_path, _paper())
    assert check_config(tmp_path).mismatches == []
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match=r"bad\.json: config is not valid JSON"):
        check_config(bad)
    with pytest.raises(ConfigError, match=r"missing\.json: cannot read config"):
        check_config(tmp_path / "missing.json")
    with pytest.raises(ConfigError, match="must be a JSON object, got list"):
        check_config(_write(tmp_path, [1, 2], "list.json"))  # type: ignore[arg-type]


def test_cli_exit_codes_and_output(tmp_path):
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pybridge", "check-config", *args], capture_output=True, text=True, cwd=REPO)

    ok = cli(str(PAPER))
    assert ok.returncode == 0 and "0 mismatches" in ok.stdout
    raw = _paper()
    raw["num_attention_heads"] = 64
    bad = cli(str(_write(tmp_path, raw)))
    assert bad.returncode == 1
    assert "field 'num_attention_heads' is 64; the K3 report has 96" in bad.stdout
    gone = cli(str(tmp_path / "nope.json"))
    assert gone.returncode == 2 and gone.stderr.startswith("error: ") and "Traceback" not in gone.stderr


def test_vision_fields_and_the_parameter_count_are_checked(tmp_path):
    raw = _paper()
    raw["vision_config"]["vt_num_attention_heads"] = 16
    raw["vision_config"]["qkv_hidden_size"] = 1024  # 16 heads of 64: the file still loads
    raw["vision_config"]["merge_kernel_size"] = [2, 1]
    result = check_config(_write(tmp_path, raw))
    by_field = {m.field: m for m in result.mismatches}
    assert set(by_field) == {"vision_config.vt_num_attention_heads", "vision_config.merge_kernel_size", VISION_PARAMETERS}
    # by hand: 27 blocks lose 4 * (1536 - 1024) * 1024 attention weights: 401,214,464 - 56,623,104 = 344.6 M
    assert (by_field[VISION_PARAMETERS].actual, by_field[VISION_PARAMETERS].expected) == (345, 401)
    assert "401 M parameters" in by_field[VISION_PARAMETERS].message(tmp_path / "config.json")


def test_wider_vision_mlp_changes_only_the_parameter_count(tmp_path):
    raw = _paper()
    raw["vision_config"]["vt_intermediate_size"] = 4352  # not report-stated; + 27 * 2 * 1024 * 256
    (m,) = check_config(_write(tmp_path, raw)).mismatches
    assert (m.field, m.actual, m.expected) == (VISION_PARAMETERS, 415, 401)


def test_text_only_config_says_the_vision_fields_were_not_checked(tmp_path):
    raw = _paper()
    del raw["vision_config"]
    result = check_config(_write(tmp_path, raw))
    assert result.mismatches == [] and result.checked == len(REPORT_FIELDS)
    assert result.vision_unchecked == "the file has no vision_config (a text-only model)"
