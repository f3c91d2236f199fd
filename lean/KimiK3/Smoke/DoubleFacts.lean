module

public import KimiK3.Smoke.Double

/-!
# Smoke test: using another module's definition and lemma

Proves facts about `KimiK3.Smoke.double` from a second module, which only works when the first
module exposes its definitions through the module system.
-/

@[expose] public section

namespace KimiK3.Smoke

/-- Doubling twice multiplies by four (uses the lemma of the imported module). -/
theorem double_double (n : Nat) : double (double n) = 4 * n := by
  rw [double_eq_two_mul, double_eq_two_mul]; omega

/-- The double of a number is even (unfolds the imported definition). -/
theorem double_mod_two (n : Nat) : double n % 2 = 0 := by
  unfold double; omega

end KimiK3.Smoke
