module

public import KimiK3.Sequence.Kernel

/-!
# Causal scan: a left-to-right stateful map (k3-spec §2.1)

`CausalScan.run f s xs` threads a state through the list `xs` from left to right; at every
element the step `f` returns the next state and one output. `CausalScan.run` is defined in `Kernel.lean`. Every sequence mixer of K3 (KDA,
Gated MLA) is run over a sequence this way (`SequenceMixer.forward` in the article).

Proved here: the outputs are as many as the inputs (`outputs_length`), running a concatenation
is running the second part from the state the first part left (`run_append`), and mapping a
function over the outputs commutes with the scan (`run_map_output`).
-/

@[expose] public section

namespace KimiK3

namespace CausalScan

variable {σ ι ο π : Type}

@[simp] theorem run_nil (f : σ → ι → σ × ο) (s : σ) : run f s [] = (s, []) := rfl

@[simp] theorem run_cons (f : σ → ι → σ × ο) (s : σ) (x : ι) (xs : List ι) :
    run f s (x :: xs) = ((run f (f s x).1 xs).1, (f s x).2 :: (run f (f s x).1 xs).2) := rfl

/-- The final state is a left fold of the state part of the step. -/
theorem run_fst (f : σ → ι → σ × ο) (s : σ) (xs : List ι) :
    (run f s xs).1 = xs.foldl (fun s x => (f s x).1) s := by
  induction xs generalizing s with
  | nil => rfl
  | cons x xs ih => simp only [run_cons, List.foldl_cons]; exact ih _

/-- A causal scan has one output per input. -/
theorem outputs_length (f : σ → ι → σ × ο) (s : σ) (xs : List ι) :
    (run f s xs).2.length = xs.length := by
  induction xs generalizing s with
  | nil => rfl
  | cons x xs ih => simp only [run_cons, List.length_cons, ih]

/-- Running `xs ++ ys` runs `xs`, then `ys` from the state `xs` left; the outputs are
concatenated. -/
theorem run_append (f : σ → ι → σ × ο) (s : σ) (xs ys : List ι) :
    run f s (xs ++ ys) =
      ((run f (run f s xs).1 ys).1, (run f s xs).2 ++ (run f (run f s xs).1 ys).2) := by
  induction xs generalizing s with
  | nil => rfl
  | cons x xs ih => simp only [List.cons_append, run_cons, ih]

/-- Mapping `g` over the outputs of a scan is the scan of the step followed by `g`. -/
theorem run_map_output (f : σ → ι → σ × ο) (g : ο → π) (s : σ) (xs : List ι) :
    run (fun s x => ((f s x).1, g (f s x).2)) s xs =
      ((run f s xs).1, (run f s xs).2.map g) := by
  induction xs generalizing s with
  | nil => rfl
  | cons x xs ih => simp only [run_cons, ih, List.map_cons]

/-- The `i`-th output depends only on the first `i + 1` inputs (causality). -/
theorem run_outputs_prefix (f : σ → ι → σ × ο) (s : σ) (xs ys : List ι) :
    (run f s (xs ++ ys)).2.take xs.length = (run f s xs).2 := by
  rw [run_append, List.take_append_of_le_length (by rw [outputs_length]; exact Nat.le_refl _),
    ← outputs_length f s xs, List.take_length]

end CausalScan

end KimiK3
