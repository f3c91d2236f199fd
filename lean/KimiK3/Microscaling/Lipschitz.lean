module

public import KimiK3.Channel.SiTU
public import KimiK3.Microscaling.Lemmas

/-!
# Lipschitz facts about `tanh` and the sigmoid, and SiTU's sensitivity

`LipschitzLaws α` assumes what the reals satisfy: `|tanh a − tanh b| ≤ |a − b|`
(`|tanh'| = 1 − tanh² ≤ 1`) and `|σ a − σ b| ≤ |a − b| / 4` (`σ' = σ (1 − σ) ≤ 1/4`). They are
**trusted**, like `ScalarLaws` (Core has no analysis). From them:

* `abs_softCap_sub_le` — `|softCap c a − softCap c b| ≤ |a − b|` for `c > 0`;
* `SiTU.abs_gate_sub_le` — the gated half `softCap c_g g · σ g` is `(1 + c_g/4)`-Lipschitz;
* **`SiTU.abs_scalar_sub_le`** — `|SiTU(g', u') − SiTU(g, u)| ≤ (1 + c_g/4) c_u |g' − g| + c_g |u' − u|`.
-/

@[expose] public section

namespace KimiK3

/-- Lipschitz bounds of `tanh` (constant 1) and the sigmoid (constant 1/4), true of the reals;
assumed where an error bound needs them. -/
class LipschitzLaws (α : Type) [Scalar α] : Prop where
  /-- `tanh` is 1-Lipschitz. -/
  abs_tanh_sub_le : ∀ a b : α, Scalar.abs (Scalar.tanh a - Scalar.tanh b) ≤ Scalar.abs (a - b)
  /-- The sigmoid is 1/4-Lipschitz. -/
  abs_sigmoid_sub_le : ∀ a b : α, Scalar.abs (Scalar.sigmoid a - Scalar.sigmoid b) ≤ Scalar.abs (a - b) / 4

variable {α : Type} [ScalarLaws α] [LipschitzLaws α]

/-- The soft cap is 1-Lipschitz for a positive cap. -/
theorem abs_softCap_sub_le {c : α} (hc : 0 < c) (a b : α) :
    Scalar.abs (softCap c a - softCap c b) ≤ Scalar.abs (a - b) := by
  unfold softCap
  have e : c * Scalar.tanh (a / c) - c * Scalar.tanh (b / c) = c * (Scalar.tanh (a / c) - Scalar.tanh (b / c)) := by
    grind
  rw [e, abs_mul', abs_of_nonneg (Std.le_of_lt hc)]
  have h1 := LipschitzLaws.abs_tanh_sub_le (a / c) (b / c)
  have e2 : a / c - b / c = (a - b) / c := by grind
  rw [e2] at h1
  have h2 := mul_le_mul_of_nonneg_left' h1 (Std.le_of_lt hc)
  have e3 : c * Scalar.abs ((a - b) / c) = Scalar.abs (a - b) := by
    rw [abs_div_of_pos' hc]
    have : c ≠ 0 := by grind
    grind
  rw [e3] at h2; exact h2

namespace SiTU

/-- The gated half `softCap c_g g · σ g` is `(1 + c_g/4)`-Lipschitz. -/
theorem abs_gate_sub_le {gateCap : α} (hg : 0 < gateCap) (g g' : α) :
    Scalar.abs (softCap gateCap g' * Scalar.sigmoid g' - softCap gateCap g * Scalar.sigmoid g) ≤
      (1 + gateCap / 4) * Scalar.abs (g' - g) := by
  have e : softCap gateCap g' * Scalar.sigmoid g' - softCap gateCap g * Scalar.sigmoid g =
      (softCap gateCap g' - softCap gateCap g) * Scalar.sigmoid g' +
        softCap gateCap g * (Scalar.sigmoid g' - Scalar.sigmoid g) := by grind
  rw [e]
  have t := abs_add_le ((softCap gateCap g' - softCap gateCap g) * Scalar.sigmoid g')
    (softCap gateCap g * (Scalar.sigmoid g' - Scalar.sigmoid g))
  rw [abs_mul', abs_mul'] at t
  have hs0 := sigmoid_pos g'
  have hs1 := sigmoid_le_one g'
  rw [abs_of_nonneg (Std.le_of_lt hs0)] at t
  have h1 := abs_softCap_sub_le hg g' g
  have h2 := abs_softCap_le (Std.le_of_lt hg) g
  have h3 := LipschitzLaws.abs_sigmoid_sub_le g' g
  have p1 := mul_le_mul'' h1 hs1 (abs_nonneg _) (Std.le_of_lt hs0)
  have p2 := mul_le_mul'' h2 h3 (Std.le_of_lt hg) (abs_nonneg _)
  grind

/-- **SiTU's sensitivity**: `|SiTU(g', u') − SiTU(g, u)| ≤ (1 + c_g/4) c_u |g' − g| + c_g |u' − u|`
for positive caps. -/
theorem abs_scalar_sub_le {gateCap upCap : α} (hg : 0 < gateCap) (hu : 0 < upCap) (g u g' u' : α) :
    Scalar.abs (scalar gateCap upCap g' u' - scalar gateCap upCap g u) ≤
      (1 + gateCap / 4) * upCap * Scalar.abs (g' - g) + gateCap * Scalar.abs (u' - u) := by
  unfold scalar
  have e : softCap gateCap g' * Scalar.sigmoid g' * softCap upCap u' -
      softCap gateCap g * Scalar.sigmoid g * softCap upCap u =
      (softCap gateCap g' * Scalar.sigmoid g' - softCap gateCap g * Scalar.sigmoid g) * softCap upCap u' +
        softCap gateCap g * Scalar.sigmoid g * (softCap upCap u' - softCap upCap u) := by grind
  rw [e]
  have t := abs_add_le
    ((softCap gateCap g' * Scalar.sigmoid g' - softCap gateCap g * Scalar.sigmoid g) * softCap upCap u')
    (softCap gateCap g * Scalar.sigmoid g * (softCap upCap u' - softCap upCap u))
  rw [abs_mul', abs_mul'] at t
  have h1 := abs_gate_sub_le hg g g'
  have h2 := abs_softCap_le (Std.le_of_lt hu) u'
  have h3 := abs_gate_le (Std.le_of_lt hg) g
  have h4 := abs_softCap_sub_le hu u' u
  have p1 := mul_le_mul'' h1 h2 (mul_nonneg' (by grind) (abs_nonneg _)) (abs_nonneg _)
  have p2 := mul_le_mul'' h3 h4 (Std.le_of_lt hg) (abs_nonneg _)
  grind

end SiTU

end KimiK3
