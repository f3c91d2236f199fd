module

/-!
# Smoke test: a definition, a proof and an evaluation

Shows that the build checks proofs (`omega`, `grind`) and evaluates `Float` code on every
toolchain, offline included.
-/

@[expose] public section

namespace KimiK3.Smoke

/-- Twice a natural number. -/
def double (n : Nat) : Nat := n + n

/-- `double` multiplies by two. -/
theorem double_eq_two_mul (n : Nat) : double n = 2 * n := by
  unfold double; omega

/-- `double` is strictly increasing. -/
theorem double_lt_double {m n : Nat} (h : m < n) : double m < double n := by
  unfold double; grind

/-- Twice a float, the executable twin of `double`. -/
def doubleFloat (x : Float) : Float := x + x

#guard doubleFloat 1.25 == 2.5

#eval doubleFloat 1.25

end KimiK3.Smoke
