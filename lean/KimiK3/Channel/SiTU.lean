module

public import KimiK3.Core.Kernel
public import KimiK3.Core.ScalarFacts

/-!
# Soft cap and SiTU (report §2.3.2, App. B, Eq. 19)

* `softCap c x = c · tanh (x / c)`;
* `SiTU.scalar c_g c_u g u = softCap c_g g · σ g · softCap c_u u` — the sigmoid reads the
  **uncapped** gate `g`;
* `SiTU.vector` applies `SiTU.scalar` coordinatewise.

Bounds: `abs_softCap_le` (|softCap c x| ≤ c), `SiTU.abs_scalar_le_mul_caps`
(|SiTU| ≤ c_g·c_u for nonnegative caps) and `SiTU.paper_caps_bound` (≤ 100 at caps 4, 25).

Executable generic definitions of this folder are `@[macro_inline]` (why: `Core/README.md`,
"Toolchain constraints").
-/

@[expose] public section

namespace KimiK3

variable {α : Type}

/-- The soft cap `softCap c x = c · tanh (x / c)` (report Eq. 19). -/
@[macro_inline] def softCap [Scalar α] (cap x : α) : α := cap * Scalar.tanh (x / cap)

/-- A soft cap with nonnegative cap stays within `[-c, c]`: `|softCap c x| ≤ c`. -/
theorem abs_softCap_le [ScalarLaws α] {cap : α} (h : 0 ≤ cap) (x : α) :
    Scalar.abs (softCap cap x) ≤ cap :=
  abs_mul_le_of_unit h (ScalarLaws.neg_one_le_tanh _) (ScalarLaws.tanh_le_one _)

namespace SiTU

/-- SiTU on one coordinate (report Eq. 19):
`softCap gateCap gate · σ(gate) · softCap upCap up`. The sigmoid reads the **uncapped** gate. -/
@[macro_inline] def scalar [Scalar α] (gateCap upCap gate up : α) : α :=
  (softCap gateCap gate * Scalar.sigmoid gate) * softCap upCap up

/-- SiTU applied coordinatewise to a gate vector and an up vector (report Eq. 19). -/
@[macro_inline] def vector [Scalar α] {h : Nat} (gateCap upCap : α) (gate up : Tensor α [h]) : Tensor α [h] :=
  fun j => scalar gateCap upCap (gate j) (up j)

@[simp] theorem vector_apply [Scalar α] {h : Nat} (gateCap upCap : α) (gate up : Tensor α [h])
    (j : Fin h) : vector gateCap upCap gate up j = scalar gateCap upCap (gate j) (up j) := rfl

/-- The gated half `softCap c_g g · σ g` lies within `[-c_g, c_g]`. -/
theorem abs_gate_le [ScalarLaws α] {gateCap : α} (hGate : 0 ≤ gateCap) (gate : α) :
    Scalar.abs (softCap gateCap gate * Scalar.sigmoid gate) ≤ gateCap := by
  have h1 := (abs_le_iff'.mp (abs_softCap_le hGate gate))
  have hs0 := sigmoid_pos gate
  have hs1 := sigmoid_le_one gate
  have := mul_mem_interval (a := gateCap) (b := 1) h1.1 h1.2 (by grind) hs1
  rw [abs_le_iff']; grind

/-- **SiTU bound** (report Eq. 19): for nonnegative caps, `|SiTU c_g c_u g u| ≤ c_g · c_u` for
every gate and up value. -/
theorem abs_scalar_le_mul_caps [ScalarLaws α] {gateCap upCap : α} (hGate : 0 ≤ gateCap)
    (hUp : 0 ≤ upCap) (gate up : α) :
    Scalar.abs (scalar gateCap upCap gate up) ≤ gateCap * upCap :=
  abs_mul_le_mul (abs_gate_le hGate gate) (abs_softCap_le hUp up)

/-- With the paper's caps `c_g = 4`, `c_u = 25`: `|SiTU 4 25 g u| ≤ 100` (report Eq. 19). -/
theorem paper_caps_bound [ScalarLaws α] (gate up : α) :
    Scalar.abs (scalar (4 : α) 25 gate up) ≤ 100 := by
  have := abs_scalar_le_mul_caps (α := α) (gateCap := 4) (upCap := 25) (by grind) (by grind)
    gate up
  grind

/-- The vector bound: every coordinate of `SiTU.vector` is at most `c_g · c_u` in absolute
value (report Eq. 19). -/
theorem abs_vector_le [ScalarLaws α] {h : Nat} {gateCap upCap : α} (hGate : 0 ≤ gateCap)
    (hUp : 0 ≤ upCap) (gate up : Tensor α [h]) (j : Fin h) :
    Scalar.abs (vector gateCap upCap gate up j) ≤ gateCap * upCap :=
  abs_scalar_le_mul_caps hGate hUp (gate j) (up j)

end SiTU

end KimiK3
