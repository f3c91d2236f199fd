module

public import KimiK3.Channel.Route

/-!
# The route checker on lists, for a runtime (k3-spec §4 rung 05 "runtime top-k")

A runtime (difftest, a serving stack) holds one MoE layer's bias-adjusted router scores as a
list of `E` floats (the decoder graph's `router_scores` output) and the route it staged as a
list of `k` expert ids (slot order). `Routing.checkRouteF` is `Routing.checkRoute` on the
functions those lists give, so it can be evaluated on them:

* `checkRouteF_ofFn`: on the lists of a score function `Fin E → Float` and a slot function
  `Fin k → Fin E`, `checkRouteF` **is** `checkRoute` on those functions — the predicate that
  `LanguageModel.RoutesPass`, `Decoder.program_eval_step` and `Decoder.program_eval_run` assume;
* `checkRouteF_ofFn_iff`: so it accepts exactly the injective top-`k` routes (`checkRoute_iff`).

Its list helpers are first-order recursions (no `Array.ofFn`, no generic helper), so the offline
toolchain compiles them in a bundle.
-/

@[expose] public section

namespace KimiK3

namespace Routing

/-- The `i`-th entry of a list of floats (`0` past its end). -/
def floatAt : List Float → Nat → Float
  | [], _ => 0
  | x :: _, 0 => x
  | _ :: xs, i + 1 => floatAt xs i

/-- The `i`-th entry of a list of naturals (`0` past its end). -/
def natAt : List Nat → Nat → Nat
  | [], _ => 0
  | x :: _, 0 => x
  | _ :: xs, i + 1 => natAt xs i

/-- The length of a list of naturals. -/
def natLen : List Nat → Nat
  | [] => 0
  | _ :: xs => natLen xs + 1

/-- Whether every entry of a list is below `E`. -/
def allBelow (E : Nat) : List Nat → Bool
  | [] => true
  | x :: xs => decide (x < E) && allBelow E xs

/-- **The route checker at `Float` on lists** (entry point for a runtime; report Eq. 13 with the
tie rule `Beats`): `scores` are the `E` bias-adjusted router scores of one MoE layer (the graph's
`router_scores` output), `route` the `k` expert ids the runtime staged in the slots. `true` iff
the route has `k` entries, all below `E`, pairwise different, and is a top-`k` of the scores with
the tie rule of `Routing.Beats` (higher score, then lower index): `Routing.checkRoute` on the
functions the lists give (`checkRouteF_ofFn`). -/
def checkRouteF (E k : Nat) (scores : List Float) (route : List Nat) : Bool :=
  decide (natLen route = k) && allBelow E route &&
    (if hE : 0 < E then
      checkRoute (fun e : Fin E => floatAt scores e.val)
        (fun i : Fin k => ⟨natAt route i.val % E, Nat.mod_lt _ hE⟩)
    else decide (k = 0))

/-- `floatAt` reads the entries of `List.ofFn f`. -/
theorem floatAt_ofFn : ∀ {n : Nat} (f : Fin n → Float) (i : Fin n), floatAt (List.ofFn f) i.val = f i
  | 0, _, i => i.elim0
  | _ + 1, f, ⟨0, _⟩ => by rw [List.ofFn_succ]; rfl
  | _ + 1, f, ⟨i + 1, h⟩ => by
    rw [List.ofFn_succ]
    exact floatAt_ofFn (fun j => f j.succ) ⟨i, Nat.lt_of_succ_lt_succ h⟩

/-- `natAt` reads the entries of `List.ofFn f`. -/
theorem natAt_ofFn : ∀ {n : Nat} (f : Fin n → Nat) (i : Fin n), natAt (List.ofFn f) i.val = f i
  | 0, _, i => i.elim0
  | _ + 1, f, ⟨0, _⟩ => by rw [List.ofFn_succ]; rfl
  | _ + 1, f, ⟨i + 1, h⟩ => by
    rw [List.ofFn_succ]
    exact natAt_ofFn (fun j => f j.succ) ⟨i, Nat.lt_of_succ_lt_succ h⟩

/-- `natLen` of `List.ofFn f` is its length `n`. -/
theorem natLen_ofFn : ∀ {n : Nat} (f : Fin n → Nat), natLen (List.ofFn f) = n
  | 0, _ => by rw [List.ofFn_zero]; rfl
  | _ + 1, f => by
    rw [List.ofFn_succ, natLen, natLen_ofFn]

/-- A list of values below `E` passes `allBelow E`. -/
theorem allBelow_ofFn {E : Nat} : ∀ {n : Nat} (f : Fin n → Nat), (∀ i, f i < E) → allBelow E (List.ofFn f) = true
  | 0, _, _ => by rw [List.ofFn_zero]; rfl
  | _ + 1, f, h => by
    rw [List.ofFn_succ, allBelow, allBelow_ofFn (fun j => f j.succ) (fun j => h j.succ), Bool.and_true]
    exact decide_eq_true (h 0)

/-- **The list checker is the checker.** On the list of a layer's scores and the list of its
staged slots' expert ids, `checkRouteF` is `checkRoute` on the score and slot functions (the
hypothesis of `LanguageModel.RoutesPass`). -/
theorem checkRouteF_ofFn {E k : Nat} (hE : 0 < E) (score : Fin E → Float) (slot : Fin k → Fin E) :
    checkRouteF E k (List.ofFn score) (List.ofFn fun i => (slot i).val) = checkRoute score slot := by
  have hs : (fun e : Fin E => floatAt (List.ofFn score) e.val) = score := funext (floatAt_ofFn score)
  have hr : (fun i : Fin k => (⟨natAt (List.ofFn fun i => (slot i).val) i.val % E, Nat.mod_lt _ hE⟩ : Fin E)) =
      slot := by
    funext i
    apply Fin.ext
    rw [natAt_ofFn (fun i => (slot i).val) i]
    exact Nat.mod_eq_of_lt (slot i).isLt
  rw [checkRouteF, natLen_ofFn, allBelow_ofFn _ (fun i => (slot i).isLt), dif_pos hE, hs, hr]
  simp only [decide_true, Bool.true_and]

/-- `checkRouteF` on a layer's score and slot lists accepts exactly the injective top-`k` routes. -/
theorem checkRouteF_ofFn_iff {E k : Nat} (hE : 0 < E) (score : Fin E → Float) (slot : Fin k → Fin E) :
    checkRouteF E k (List.ofFn score) (List.ofFn fun i => (slot i).val) = true ↔
      (∀ i j, slot i = slot j → i = j) ∧ IsTopK score slot := by
  rw [checkRouteF_ofFn hE, checkRoute_iff]

end Routing

end KimiK3
