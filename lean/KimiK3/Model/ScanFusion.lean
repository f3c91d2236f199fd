module

public import KimiK3.Model.Streaming

/-!
# Scan fusion for a stack of stateful layers (k3-spec §3 `run_eq_logits`, in general)

`ModelList.scanLayers f layers states x` passes one token `x` through a stack of stateful layers
(layer `l` with its state `s` maps the carried value to a new state and a new value). Scanning
that over the tokens (token-major: one token through every layer, then the next token) is the
same as scanning each layer over the whole sequence, one layer after the other (layer-major:
`scanLayers` again, now carrying the whole sequence from layer to layer):

**`ModelList.run_stackStep`**: `CausalScan.run (stackStep f layers) states xs` is
`swap (scanLayers (fun l s ys => CausalScan.run (f l) s ys) layers states xs)` — the same final
states and the same outputs — whenever there is no more state than layers
(`states.length ≤ layers.length`; with more, a token-by-token run over no token keeps the extra
states, the layer-major one drops them).

No scalar, no law: the statement is about the order of evaluation only. K3's model proves its
own instance (`LanguageModel.run_stackStep`, `Streaming.lean`, for the AttnRes depth state); the
Kimi Linear variant uses this one (`KimiLinear.Model.run_eq_prefillWith_forwardFrom`,
`KimiLinear/Prefill.lean`). Kept out of `Streaming.lean` so that adding it rebuilds none of that
file's importers.
-/

@[expose] public section

namespace KimiK3

namespace CausalScan

variable {σ ι : Type}

/-- A step that keeps the state `s` and passes its input through: the scan keeps `s` and outputs
the inputs. -/
theorem run_eq_of_fixed (g : σ → ι → σ × ι) (s : σ) (hg : ∀ x, g s x = (s, x)) (xs : List ι) :
    run g s xs = (s, xs) := by
  induction xs with
  | nil => rfl
  | cons x xs ih => simp only [run_cons, hg, ih]

end CausalScan

namespace ModelList

variable {ℓ σ ι : Type}

/-- **One token through a stack of stateful layers, as a scan step** (states first): the new
states and the value after the last layer. -/
noncomputable def stackStep (f : ℓ → σ → ι → σ × ι) (layers : List ℓ) (states : List σ) (x : ι) :
    List σ × ι :=
  ((scanLayers f layers states x).2, (scanLayers f layers states x).1)

/-- **Token-major = layer-major for a stack of stateful layers**: scanning the stack over the
tokens gives the final states and outputs of scanning each layer over the whole sequence, first
layer first (no more states than layers). -/
theorem run_stackStep (f : ℓ → σ → ι → σ × ι) (layers : List ℓ) (states : List σ)
    (hlen : states.length ≤ layers.length) (xs : List ι) :
    CausalScan.run (stackStep f layers) states xs =
      ((scanLayers (fun l s ys => CausalScan.run (f l) s ys) layers states xs).2,
       (scanLayers (fun l s ys => CausalScan.run (f l) s ys) layers states xs).1) := by
  induction layers generalizing states xs with
  | nil =>
    have hs : states = [] := List.eq_nil_of_length_eq_zero (Nat.le_zero.mp hlen)
    subst hs
    exact CausalScan.run_eq_of_fixed (stackStep f []) [] (fun _ => rfl) xs
  | cons l ls ih =>
    cases states with
    | nil => exact CausalScan.run_eq_of_fixed (stackStep f (l :: ls)) [] (fun _ => rfl) xs
    | cons s ss =>
      have hsim := CausalScan.run_simulate (fun (p : σ × List σ) => p.1 :: p.2)
        (fun (p : σ × List σ) x =>
          (((f l p.1 x).1, (stackStep f ls p.2 (f l p.1 x).2).1), (stackStep f ls p.2 (f l p.1 x).2).2))
        (stackStep f (l :: ls)) (fun _ _ => rfl) (s, ss) xs
      simp only at hsim
      rw [hsim, CausalScan.run_compose, ih ss (Nat.le_of_succ_le_succ hlen)]
      rfl

end ModelList

end KimiK3
