module

public import KimiK3.Depth.BlockState
public import KimiK3.Depth.AttnResBridge

/-!
# Every layer output is stored exactly once (k3-spec §2.4, §2.5)

The content counterpart of `layers_finishLayer`: the completed block sums plus the partial sum
(`BlockState.total`) always equal the sum of every committed `seqOut + chanOut`
(`total_commitAll_initial`), so no layer output is lost or counted twice when blocks are
folded. Holds over every field model (`ScalarField`) for any block size. The invariant
`Clean` (an empty partial block has sum zero) holds initially and after every commit
(`clean_finishLayer`); `afterSequence` relies on it, since it drops `P` when the block is empty.
-/

@[expose] public section

namespace KimiK3

namespace BlockState

open AttnRes

variable {α : Type} {d : Nat}

/-- The total stored content at coordinate `k`: the completed block sums plus the partial sum.
For proofs only. -/
noncomputable def total [Scalar α] (s : BlockState α d) (k : Fin d) : α :=
  listSum (s.blocks.map (fun b => b k)) + s.partialSum k

/-- An empty partial block has sum zero. -/
def Clean [Scalar α] (s : BlockState α d) : Prop := s.count = 0 → ∀ k, s.partialSum k = 0

variable [ScalarField α]

/-- The list sum of a concatenation is the sum of the list sums. -/
theorem listSum_append (l₁ l₂ : List α) : listSum (l₁ ++ l₂) = listSum l₁ + listSum l₂ := by
  induction l₁ with
  | nil => show listSum l₂ = 0 + listSum l₂; grind
  | cons x l ih => show x + listSum (l ++ l₂) = x + listSum l + listSum l₂; rw [ih]; grind

/-- The initial state is clean. -/
theorem clean_initial (e : Tensor α [d]) : (initial e).Clean := fun _ _ => rfl

/-- The initial state stores nothing besides the embedding. -/
theorem total_initial (e : Tensor α [d]) (k : Fin d) : (initial e).total k = 0 := by
  show (0 : α) + 0 = 0; grind

/-- A commit keeps the state clean. -/
theorem clean_finishLayer (blockSize : Nat) {s : BlockState α d} (seqOut chanOut : Tensor α [d]) :
    (s.finishLayer blockSize seqOut chanOut).Clean := by
  by_cases h : s.count + 1 = blockSize
  · rw [finishLayer_full s seqOut chanOut h]; intro _ _; rfl
  · rw [finishLayer_not_full s seqOut chanOut h]; intro hc; simp at hc

/-- **A commit adds exactly that layer's output** `seqOut + chanOut` to the stored content. -/
theorem total_finishLayer (blockSize : Nat) {s : BlockState α d} (hs : s.Clean) (seqOut chanOut : Tensor α [d])
    (k : Fin d) :
    (s.finishLayer blockSize seqOut chanOut).total k = s.total k + (seqOut k + chanOut k) := by
  have hp : s.afterSequence seqOut k = s.partialSum k + seqOut k := by
    by_cases hc : s.count = 0
    · simp [afterSequence, hc, hs hc k]; grind
    · simp [afterSequence, hc]
  by_cases h : s.count + 1 = blockSize
  · rw [finishLayer_full s seqOut chanOut h]
    simp only [total, List.map_append, List.map_cons, List.map_nil, listSum_append, hp]
    show listSum (s.blocks.map (fun b => b k)) + ((s.partialSum k + seqOut k + chanOut k) + 0) + 0 =
      listSum (s.blocks.map (fun b => b k)) + s.partialSum k + (seqOut k + chanOut k)
    grind
  · rw [finishLayer_not_full s seqOut chanOut h]
    simp only [total, hp]; grind

/-- Committing layers from a clean state adds the sum of their outputs. -/
theorem total_commitAll (blockSize : Nat) {s : BlockState α d} (hs : s.Clean)
    (outs : List (Tensor α [d] × Tensor α [d])) (k : Fin d) :
    (s.commitAll blockSize outs).total k = s.total k + listSum (outs.map (fun o => o.1 k + o.2 k)) := by
  induction outs generalizing s with
  | nil => show s.total k = s.total k + 0; grind
  | cons o outs ih =>
    rw [commitAll_cons, ih (clean_finishLayer blockSize o.1 o.2), total_finishLayer blockSize hs]
    show _ = s.total k + ((o.1 k + o.2 k) + listSum (outs.map (fun o => o.1 k + o.2 k)))
    grind

/-- **Conservation**: after any commits from the initial state, the completed block sums plus
the partial sum equal the sum of all committed layer outputs — each layer is stored exactly
once, whatever the block size. -/
theorem total_commitAll_initial (blockSize : Nat) (e : Tensor α [d])
    (outs : List (Tensor α [d] × Tensor α [d])) (k : Fin d) :
    ((initial e).commitAll blockSize outs).total k = listSum (outs.map (fun o => o.1 k + o.2 k)) := by
  rw [total_commitAll blockSize (clean_initial e), total_initial]; grind

end BlockState

end KimiK3
