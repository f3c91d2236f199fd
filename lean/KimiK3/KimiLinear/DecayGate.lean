module

public import KimiK3.Core.LogFacts

/-!
# The Kimi Linear decay gate: softplus log-decay (k3-spec §7, Kimi Linear)

Kimi Linear (transformers 5.23, `models/kimi_linear/modeling_kimi_linear.py`, class
`KimiLinearForgetGate`) computes the per-channel log-decay
```
g = −exp(A_log) · softplus(f + dt_bias),   softplus(z) = log(1 + exp z),
```
with `f` the low-rank logit `x W_down W_up` and `A_log` one value per head; the retention is
`α = exp(g)` (the kernels apply `g.exp()`). K3 instead bounds the log-decay below,
`g = g_min σ(e^{s}(z + b))` (`KDA.logDecay`). `softplus` is not a new scalar operation: it is
defined from `Scalar.log` and `Scalar.exp`, and its facts follow from the existing `ScalarLaws`
(`Core/LogFacts.lean`), so nothing new is trusted.

transformers evaluates softplus as `z` when `z > 20` (and fla's kernels use the same threshold);
the difference `log(1 + e^z) − z = log(1 + e^{−z}) < e^{−20} ≈ 2·10⁻⁹` is a floating-point
shortcut, not part of this reference.

Proved: `softplus_pos` (`softplus z > 0`), `softplus_lt_softplus` (strictly increasing),
`logDecay_neg` (`g < 0`), `logDecay_lt_logDecay` (a larger logit decays faster),
`retention_pos`, `retention_lt_one`, `retention_mem` (`0 < α < 1`, hence in `(0, 1]`) and
`retention_lt_retention`. Unlike K3's gate there is no floor: `α` is not bounded below by any
`e^{g_min}`.
-/

@[expose] public section

namespace KimiK3

namespace KimiLinear

variable {α : Type}

/-- Softplus `log(1 + exp z)` (k3-spec §7; transformers `KimiLinearForgetGate.forward`,
`torch.log(1.0 + torch.exp(g))`, without its `z > 20` shortcut). -/
@[macro_inline] def softplus [Scalar α] (z : α) : α := Scalar.log (1 + Scalar.exp z)

/-- The Kimi Linear log-decay `g = −exp(A_log) · softplus(z)` of one key channel, where `z`
is the logit with its bias `dt_bias` already added (k3-spec §7; transformers
`KimiLinearForgetGate.forward`: `-decay_rate * g_softplus`, `decay_rate = exp(A_log)`). -/
@[macro_inline] def logDecay [Scalar α] (logRate logit : α) : α :=
  -(Scalar.exp logRate * softplus logit)

/-- The Kimi Linear retention `α = exp(−exp(A_log) · softplus(z))` (k3-spec §7; transformers
`recurrent_kimi_delta_attention`: `g_i = g[:, i].exp()`). -/
@[macro_inline] def retention [Scalar α] (logRate logit : α) : α :=
  Scalar.exp (logDecay logRate logit)

section Laws

variable [ScalarLaws α]

/-- `softplus z > 0` for every `z` (since `1 + e^z > 1`). -/
theorem softplus_pos (z : α) : 0 < softplus z := by
  unfold softplus
  have h := log_lt_log (zero_lt_one' (α := α)) (y := 1 + Scalar.exp z)
    (by have := ScalarLaws.exp_pos z; grind)
  rwa [log_one_eq_zero] at h

/-- Softplus is strictly increasing. -/
theorem softplus_lt_softplus {z w : α} (h : z < w) : softplus z < softplus w := by
  unfold softplus
  have hz := ScalarLaws.exp_pos z
  have hzw := ScalarLaws.exp_lt_exp h
  exact log_lt_log (by grind) (by grind)

/-- **The Kimi Linear log-decay is negative**: `−e^{A_log} softplus(z) < 0` (so `≤ 0`). -/
theorem logDecay_neg (logRate logit : α) : logDecay logRate logit < 0 := by
  unfold logDecay
  have := mul_pos' (ScalarLaws.exp_pos logRate) (softplus_pos logit)
  grind

/-- A larger logit decays faster: `z < w → g(w) < g(z)` at the same rate. -/
theorem logDecay_lt_logDecay (logRate : α) {z w : α} (h : z < w) :
    logDecay logRate w < logDecay logRate z := by
  unfold logDecay
  have := Lean.Grind.OrderedRing.mul_lt_mul_of_pos_left (softplus_lt_softplus h)
    (ScalarLaws.exp_pos logRate)
  grind

/-- The retention is positive. -/
theorem retention_pos (logRate logit : α) : 0 < retention logRate logit :=
  ScalarLaws.exp_pos _

/-- The retention is below one. -/
theorem retention_lt_one (logRate logit : α) : retention logRate logit < 1 := by
  unfold retention
  rw [← ScalarLaws.exp_zero (α := α)]
  exact ScalarLaws.exp_lt_exp (logDecay_neg logRate logit)

/-- **Retention bounds** of the Kimi Linear gate: `0 < α < 1` (so `α ∈ (0, 1]`). -/
theorem retention_mem (logRate logit : α) :
    0 < retention logRate logit ∧ retention logRate logit < 1 :=
  ⟨retention_pos logRate logit, retention_lt_one logRate logit⟩

/-- The retention is strictly decreasing in the logit. -/
theorem retention_lt_retention (logRate : α) {z w : α} (h : z < w) :
    retention logRate w < retention logRate z :=
  ScalarLaws.exp_lt_exp (logDecay_lt_logDecay logRate h)

end Laws

end KimiLinear

end KimiK3
