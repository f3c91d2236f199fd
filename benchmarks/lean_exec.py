"""Lean evaluation time per case of the executable spec (`KimiK3.Exec`), issue 14.

    python benchmarks/lean_exec.py [--write docs/benchmarks.md] [--cases 2]

For each difftest component (expert, latent_moe, kda_recurrence, kda_layer, mla, attnres) and for
one whole token step of the tiny model (fixtures/tiny/config.json dims, 3-token prefix, random
weights), the cases the default `difftest run` evaluates in Lean (`--cases` per component: first random,
then an adversarial kind; `runner.lean_chosen`) are rendered with
difftest's templates and evaluated in ONE offline Lean file after one bundle (`codegen.bundle` of
`KimiK3.Exec.Kernel`'s modules), as `difftest run` does. The times are read inside Lean
(`IO.monoNanosNow` marks around the bundle and around every case), so waiting for a Lean slot
does not count: "bundle" is the elaboration and compilation of the bundled library text, "per
case" the elaboration, compilation and evaluation of one case's text. The function-backed
("before") figures are the ones issue 14 measured with the templates difftest used before.
Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from difftest import lean as dlean
from difftest import runner
from difftest.case import Case, hex_bits
from difftest.components import COMPONENTS

COMPONENT_NAMES = ("expert", "latent_moe", "kda_recurrence", "kda_layer", "mla", "attnres")
#: the per-case figures issue 14 measured with the function-backed templates (one case each)
ISSUE_BEFORE = {"expert": "about 43", "latent_moe": "did not finish in 2–3 min",
                "kda_recurrence": "did not finish in 2–3 min", "kda_layer": "did not finish in 2–3 min",
                "mla": "did not finish in 2–3 min", "attnres": "did not finish in 2–3 min",
                "decoder_step": "did not finish in 5 min"}
MARK = re.compile(r"^MARK (\S+) (\d+)$")
SECTION_BEGIN, SECTION_END = "<!-- lean-exec:begin -->", "<!-- lean-exec:end -->"


def mark(name: str) -> str:
    return f'\n#eval! show IO Unit from do IO.println s!"MARK {name} {{← IO.monoNanosNow}}"\n'


def run_file(source: str, name: str) -> tuple[dict[str, int], list[str], float]:
    """Run a standalone Lean file through this checkout's `k3spec lean --json` (it takes one of
    the machine-wide Lean slots); the marks (name -> ns), the message lines and the wall time."""
    with tempfile.TemporaryDirectory(prefix="k3-bench-", dir="/tmp") as tmp:
        path = Path(tmp) / f"{name}.lean"
        path.write_text(source, encoding="utf-8")
        start = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "k3spec", "lean", "--json", path.name], cwd=tmp,
                              capture_output=True, text=True, check=False, env={**os.environ, "PYTHONPATH": str(REPO)})
        wall = time.monotonic() - start
    texts, errors = [], []
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            msg = json.loads(line)
            (errors if msg.get("severity") == "error" else texts).append(msg.get("data", ""))
    if proc.returncode != 0 or errors:
        raise RuntimeError(f"{name}.lean failed (rc {proc.returncode}):\n" + "\n".join(errors[:5]) + proc.stderr[-2000:])
    lines = [ln for text in texts for ln in text.splitlines()]
    marks = {m.group(1): int(m.group(2)) for m in (MARK.match(ln.strip()) for ln in lines) if m}
    return marks, lines, wall


def render(items: list[tuple[object, Case]], bundle_text: str) -> str:
    """difftest's batch file for `items`, with marks around the bundle and every case."""
    cases = []
    for i, (comp, case) in enumerate(items):
        refs = dlean.TensorRefs(case)
        body = dlean.ENV.get_template(f"{comp.template}.lean.j2").render(
            T=refs, off=refs.offsets, key=f"C{i}", case=case, s=case.sizes, **comp.lean_context(case))
        cases.append({"ns": f"C{i}", "label": case.label, "hex": "".join(hex_bits(t) for t in case.tensors.values()),
                      "body": mark(f"case{i}.start") + body + mark(f"case{i}.end")})
    return dlean.ENV.get_template("batch.lean.j2").render(
        bundle=mark("bundle.start") + bundle_text + mark("bundle.end"), cases=cases)


# --- the tiny token step ----------------------------------------------------------------------

class DecoderBench:
    """One tiny token step with a 3-token prefix: `LanguageModel.run` over 4 tokens from the
    initial state, random weights of the tiny dims (normal, fan-in scaled); the logits of every
    token are the output. (difftest's `decoder_step` has no Lean leg yet; this measures what one
    would cost, through `difftest/templates/decoder_step.lean.j2`.)"""

    name = "decoder_step"
    template = "decoder_step"

    def __init__(self) -> None:
        cfg = json.loads((REPO / "fixtures" / "tiny" / "config.json").read_text())
        lac = cfg["linear_attn_config"]
        self.cfg = cfg
        self.sizes = {"vocab": cfg["vocab_size"], "D": cfg["hidden_size"], "B": cfg["attn_res_block_size"],
                      "Hm": cfg["num_attention_heads"], "Lq": cfg["q_lora_rank"], "Lkv": cfg["kv_lora_rank"],
                      "C": cfg["qk_nope_head_dim"], "Rs": cfg["qk_rope_head_dim"], "Vm": cfg["v_head_dim"],
                      "Hk": lac["num_heads"], "K": lac["head_k_dim"], "Vk": lac["head_v_dim"],
                      "W": lac["short_conv_kernel_size"], "R": lac["decay_rank"], "F": cfg["intermediate_size"],
                      "l": cfg["routed_expert_hidden_size"], "h": cfg["moe_intermediate_size"],
                      "S": cfg["num_shared_experts"], "E": cfg["num_experts"], "k": cfg["num_experts_per_token"],
                      "gc": int(cfg["activation_situ_beta"]), "uc": int(cfg["activation_situ_linear_beta"])}
        n = cfg["num_hidden_layers"]
        mla = set(lac["full_attn_layers"])
        self.layers = [{"mla": (i + 1) in mla, "moe": i >= cfg["first_k_dense_replace"]} for i in range(n)]

    def scalars(self) -> dict[str, np.ndarray]:
        """The config's scalars at each site, with the defaults `pybridge.config` documents."""
        cfg, lac = self.cfg, self.cfg["linear_attn_config"]
        eps = cfg["rms_norm_eps"]
        v = {"eps": eps, "res_eps": cfg.get("attn_res_norm_eps", eps), "final_eps": cfg.get("final_norm_eps", eps),
             "mla_eps": cfg.get("mla_latent_norm_eps", 1e-6), "moe_eps": cfg.get("latent_moe_norm_eps", eps),
             "kda_eps": lac.get("output_norm_eps", eps), "l2_eps": lac.get("l2_norm_eps", 1e-6),
             "query_scale": lac.get("query_scale", lac["head_k_dim"] ** -0.5),
             "routed_scale": cfg.get("routed_scaling_factor", 1.0)}
        return {k: np.array(x) for k, x in v.items()}

    def lean_context(self, case: Case) -> dict:
        return {"layers": self.layers, "ids": [int(i) for i in case.tensors["ids"]]}

    def make_case(self, index: int, seed: int = 0) -> Case:
        s, rng = self.sizes, np.random.default_rng([seed, index])

        def g(*shape: int) -> np.ndarray:
            return rng.standard_normal(shape) * shape[0] ** -0.5

        t: dict[str, np.ndarray] = {"ids": rng.integers(0, s["vocab"], 4).astype(np.float64),
                                    "embedding": rng.standard_normal((s["vocab"], s["D"]))}
        D = s["D"]
        for i, lay in enumerate(self.layers):
            p = f"L{i}."
            if lay["mla"]:
                H, V = s["Hm"], s["Vm"]
                t.update({p + "query_down": g(D, s["Lq"]), p + "query_norm": rng.uniform(0.5, 1.5, s["Lq"]),
                          p + "kv_down": g(D, s["Lkv"]), p + "kv_norm": rng.uniform(0.5, 1.5, s["Lkv"]),
                          p + "shared_key_down": g(D, s["Rs"]), p + "qc_up": g(s["Lq"], H, s["C"]).transpose(1, 0, 2),
                          p + "qs_up": g(s["Lq"], H, s["Rs"]).transpose(1, 0, 2), p + "key_up": g(s["Lkv"], H, s["C"]).transpose(1, 0, 2),
                          p + "value_up": g(s["Lkv"], H, V).transpose(1, 0, 2), p + "gate": g(D, H, V), p + "out": g(H * V, D).reshape(H, V, D)})
            else:
                H, K, V, W, R = s["Hk"], s["K"], s["Vk"], s["W"], s["R"]
                t.update({p + "Wq": g(D, H, K), p + "Wk": g(D, H, K), p + "Wv": g(D, H, V), p + "conv_q": g(W, H, K),
                          p + "conv_k": g(W, H, K), p + "conv_v": g(W, H, V), p + "decay_down": g(D, R),
                          p + "decay_up": g(R, H, K), p + "dt_bias": rng.standard_normal((H, K)) * 0.5,
                          p + "log_scale": rng.standard_normal(H) * 0.5,
                          p + "beta_proj": g(D, H), p + "gate": g(D, H, V), p + "out_norm": rng.uniform(0.5, 1.5, V),
                          p + "out_proj": g(H * V, D).reshape(H, V, D)})
            if lay["moe"]:
                S, E, h, l = s["S"], s["E"], s["h"], s["l"]
                t.update({p + "shared_G": g(D, S, h).transpose(1, 0, 2), p + "shared_U": g(D, S, h).transpose(1, 0, 2),
                          p + "shared_D": g(h, S, D).transpose(1, 0, 2), p + "down": g(D, l), p + "router": g(D, E),
                          p + "bias": rng.standard_normal(E) * 0.1, p + "routed_G": g(l, E, h).transpose(1, 0, 2),
                          p + "routed_U": g(l, E, h).transpose(1, 0, 2), p + "routed_D": g(h, E, l).transpose(1, 0, 2),
                          p + "norm_scale": rng.uniform(0.5, 1.5, l), p + "up": g(l, D)})
            else:
                t.update({p + "mlp_G": g(D, s["F"]), p + "mlp_U": g(D, s["F"]), p + "mlp_D": g(s["F"], D)})
            t.update({p + "w_seq": rng.standard_normal(D), p + "w_chan": rng.standard_normal(D),
                      p + "seq_norm": rng.uniform(0.5, 1.5, D), p + "chan_norm": rng.uniform(0.5, 1.5, D)})
        t.update({"w_final": rng.standard_normal(D), "final_norm": rng.uniform(0.5, 1.5, D), "head": g(D, s["vocab"]),
                  **self.scalars(),
                  "log_floor": np.array(self.cfg["linear_attn_config"]["gate_lower_bound"]),
                  "score_scale": np.array(self.cfg["mla_score_scale"])})
        t = {k: np.array(v, dtype=np.float64, order="C") for k, v in t.items()}
        return Case("decoder_step", index, "random", seed, dict(s), t)


# --- measurement and report ------------------------------------------------------------------

def fmt(x: float | None) -> str:
    return "–" if x is None else (f"{x:.2f}" if x < 10 else f"{x:.0f}")


def report(rows: dict[str, list[float]], bundle_s: float, wall: float, cases: int) -> str:
    lines = [SECTION_BEGIN, "## Lean evaluation per case: function-backed reference vs executable spec (issue 14)", "",
             "Produced by `python benchmarks/lean_exec.py --write docs/benchmarks.md` (one run). Times are read",
             "inside the offline Lean interpreter (wasm), so waiting for a Lean slot does not count. `after`:",
             "`KimiK3.Exec` (array-backed, proved equal to the reference), every case of every component in one",
             f"file after one bundle, {cases} cases per component (first random, then the next input kind); per case:",
             "elaborating, compiling and evaluating its text. `before`: the function-backed templates, as issue 14",
             "measured them (one case each).", "",
             (f"Machine: {platform.machine()}, {os.cpu_count()} cores, shared with other Lean processes; "
              f"1-min load average at the end {os.getloadavg()[0]:.1f}."), "",
             ("* Fixed cost of the executable bundle (`Core/Scalar`, `Core/Kernel`, `Sequence/Kernel`, `Exec/Kernel`"
              f" elaborated and compiled), once per file: {bundle_s:.1f} s."),
             f"* Wall time of the whole file, Lean start-up and slot wait included: {wall:.0f} s.", "",
             "| component | before: per case (s) | after: per case (s), each case |", "|---|---|---|"]
    for name, secs in rows.items():
        lines.append(f"| {name} | {ISSUE_BEFORE[name]} | {', '.join(fmt(x) for x in secs)} |")
    lines += ["", "`decoder_step` here is `LanguageModel.run` over 4 tokens (3-token prefix, then the step) from the",
              "initial state at the tiny configuration's widths (random weights), per case: the whole prefix included.",
              SECTION_END]
    return "\n".join(lines) + "\n"


def write_section(path: Path, section: str) -> None:
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if SECTION_BEGIN in text:
        head, rest = text.split(SECTION_BEGIN, 1)
        tail = rest.split(SECTION_END, 1)[1] if SECTION_END in rest else ""
        text = head + section + tail.lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text, encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", type=Path, help="write (or replace) the section in this markdown file")
    ap.add_argument("--cases", type=int, default=2)
    ap.add_argument("--only", nargs="*", help="components to measure (default: all, then decoder_step)")
    args = ap.parse_args()
    names = args.only or [*COMPONENT_NAMES, "decoder_step"]
    # the cases the default `difftest run` evaluates in Lean, as the Lean leg sees them
    chosen = runner.lean_chosen(runner.build_cases([n for n in names if n in COMPONENTS], None, 0), args.cases, False)
    items = [(comp, view) for _, comp, view in chosen]
    if "decoder_step" in names:
        items += [(DecoderBench(), DecoderBench().make_case(i)) for i in range(args.cases)]
    marks, _, wall = run_file(render(items, dlean.library_bundle(("KimiK3.Exec.Kernel",))), "ExecBench")
    rows: dict[str, list[float]] = {}
    for i, (comp, _) in enumerate(items):
        rows.setdefault(comp.name, []).append((marks[f"case{i}.end"] - marks[f"case{i}.start"]) / 1e9)
    section = report(rows, (marks["bundle.end"] - marks["bundle.start"]) / 1e9, wall, args.cases)
    print(section)
    if args.write:
        write_section(args.write, section)


if __name__ == "__main__":
    main()
