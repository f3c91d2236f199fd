module

public import KimiK3.Core.MatMul

/-!
# The EAGLE-3 draft: feature fusion and the self-feeding training-time test (report §4.1.4, Eq. 16)

K3's draft model (EAGLE-3) reads the target's hidden features at a low, a middle and a high
depth, fused by one projection, and is trained by *training-time test*: after the first step it
feeds itself its own hidden feature instead of asking the target for a fresh one.

* `FeatureFusion.forward fusion features = f₀ F₀ + f₁ F₁ + f₂ F₂`: concatenate-and-project
  (`[f₀ f₁ f₂] [F₀; F₁; F₂]`, row-vector convention) written as three products;
  **`initial_fusion_eq_high`**: with `F₀ = F₁ = 0`, `F₂ = I` (the `[0 0 I]` initialization) the
  fused feature is the high-depth feature, exactly; `forward_initialFusion` for the initializer
  `initialFusion`.
* `SelfFeedingDraft` (one draft step from a cache, a token and a feature), `trainingTimeTestStep`
  and `trainingTimeTest` (a list of tokens); **`trainingTimeTest_length`** (one output per
  token), **`trainingTimeTest_append`** (running `ts ++ us` is running `ts`, then `us` from the
  state reached), `trainingTimeTestStep_feature` (the next feature is the draft's own).

Generic executable definitions are `@[macro_inline]` (`Core/README.md`, "Toolchain constraints").
-/

@[expose] public section

namespace KimiK3.Training

open KimiK3 KimiK3.Tensor

variable {α : Type}

/-- A three-term sum, left to right (a candidate for `Core/Sum.lean`). -/
theorem finSum_three [ScalarField α] (f : Fin 3 → α) : finSum 3 f = (f 0 + f 1) + f 2 := by
  have h : finSum 3 f = ((0 + f 0) + f 1) + f 2 := rfl
  rw [h]; grind

namespace FeatureFusion

/-- **Feature fusion** (report §4.1.4, Eq. 16 context; k3-spec §2.14): the draft's input feature
from the target's low, middle and high features `features j` (`j = 0, 1, 2`) and the fusion
weights `fusion j : [d, d]` (row-vector convention, `[input, output]`):
`Σ_j features_j · fusion_j`, which is the concatenated features times the stacked weights. -/
@[macro_inline] def forward [Scalar α] {d : Nat} (fusion : Tensor α [3, d, d])
    (features : Tensor α [3, d]) : Tensor α [d] :=
  fun k => finSum 3 (fun j => vecMatMul (features j) (fusion j) k)

/-- The `d × d` zero matrix. -/
@[macro_inline] def zero [Scalar α] (d : Nat) : Tensor α [d, d] := fun _ _ => 0

/-- The `d × d` identity matrix. -/
@[macro_inline] def identity [Scalar α] (d : Nat) : Tensor α [d, d] :=
  fun i k => if i = k then 1 else 0

/-- The **`[0 0 I]` initialization** of the fusion (report §4.1.4; k3-spec §2.14): zero on the
low and middle features, the identity on the high one. -/
@[macro_inline] def initialFusion [Scalar α] (d : Nat) : Tensor α [3, d, d] :=
  fun j => if j = 2 then identity d else zero d

variable [ScalarField α]

/-- A vector times the zero matrix is zero. -/
theorem vecMatMul_zero {d : Nat} (x : Tensor α [d]) (k : Fin d) : vecMatMul x (zero d) k = 0 := by
  rw [vecMatMul_apply]
  have h : ∀ i : Fin d, x i * zero (α := α) d i k = 0 := fun i => by
    show x i * 0 = 0; grind
  rw [finSum_congr h, finSum_const_zero]

/-- A vector times the identity is itself. -/
theorem vecMatMul_identity {d : Nat} (x : Tensor α [d]) (k : Fin d) :
    vecMatMul x (identity d) k = x k := by
  rw [vecMatMul_apply]
  exact finSum_mul_delta d k x

/-- **`[0 0 I]` gives the high feature** (k3-spec §2.14, exact): if the low and middle fusion
blocks are zero and the high block is the identity, the fused feature is `features 2`. -/
theorem initial_fusion_eq_high {d : Nat} (fusion : Tensor α [3, d, d]) (features : Tensor α [3, d])
    (hLow : fusion 0 = zero d) (hMiddle : fusion 1 = zero d) (hHigh : fusion 2 = identity d) :
    forward fusion features = features 2 := by
  funext k
  show finSum 3 (fun j => vecMatMul (features j) (fusion j) k) = features 2 k
  rw [finSum_three]
  show vecMatMul (features 0) (fusion 0) k + vecMatMul (features 1) (fusion 1) k +
      vecMatMul (features 2) (fusion 2) k = features 2 k
  rw [hLow, hMiddle, hHigh, vecMatMul_zero, vecMatMul_zero, vecMatMul_identity]
  grind

/-- The initializer `initialFusion` has the `[0 0 I]` blocks, so its fused feature is the high
feature. -/
theorem forward_initialFusion {d : Nat} (features : Tensor α [3, d]) :
    forward (initialFusion d) features = features 2 :=
  initial_fusion_eq_high _ features rfl rfl rfl

end FeatureFusion

/-- **A self-feeding draft** (EAGLE-3 training-time test, report §4.1.4; k3-spec §2.14): one
draft step from its causal cache, the token just fed and a feature standing for the target's
hidden state, giving the new cache, the draft's own new hidden feature and the step's output
(its next-token distribution). -/
structure SelfFeedingDraft (Cache Feature Token Out : Type) where
  /-- One step: `(cache, token, feature) ↦ (new cache, new hidden feature, output)`. -/
  stepFromFeature : Cache → Token → Feature → Cache × Feature × Out

namespace SelfFeedingDraft

variable {Cache Feature Token Out : Type}

/-- **One training-time-test step** (k3-spec §2.14): from the state `(cache, feature)` and a
token, the next state is the new cache with the draft's **own** hidden feature, and the output
is the step's distribution; the target is not asked for a fresh feature. -/
def trainingTimeTestStep (model : SelfFeedingDraft Cache Feature Token Out)
    (state : Cache × Feature) (token : Token) : (Cache × Feature) × Out :=
  let r := model.stepFromFeature state.1 token state.2
  ((r.1, r.2.1), r.2.2)

/-- **Training-time test over a token list** (k3-spec §2.14): the steps chained from `state`;
the final state and one output per token, in order. -/
def trainingTimeTest (model : SelfFeedingDraft Cache Feature Token Out) :
    List Token → Cache × Feature → (Cache × Feature) × List Out
  | [], state => (state, [])
  | token :: tokens, state =>
    let r := model.trainingTimeTestStep state token
    let rest := model.trainingTimeTest tokens r.1
    (rest.1, r.2 :: rest.2)

variable (model : SelfFeedingDraft Cache Feature Token Out)

/-- **Self-feeding**: the feature of the next state is the hidden feature the draft step itself
produced. -/
theorem trainingTimeTestStep_feature (state : Cache × Feature) (token : Token) :
    (model.trainingTimeTestStep state token).1.2 =
      (model.stepFromFeature state.1 token state.2).2.1 := rfl

/-- Training-time test on no tokens keeps the state and outputs nothing. -/
@[simp] theorem trainingTimeTest_nil (state : Cache × Feature) :
    model.trainingTimeTest [] state = (state, []) := rfl

/-- Training-time test on `token :: tokens`: one step, then the rest from the state it reached. -/
theorem trainingTimeTest_cons (token : Token) (tokens : List Token) (state : Cache × Feature) :
    model.trainingTimeTest (token :: tokens) state =
      ((model.trainingTimeTest tokens (model.trainingTimeTestStep state token).1).1,
        (model.trainingTimeTestStep state token).2 ::
          (model.trainingTimeTest tokens (model.trainingTimeTestStep state token).1).2) := rfl

/-- **One output per token** (`trainingTimeTest_length`, k3-spec §2.14). -/
theorem trainingTimeTest_length (tokens : List Token) (state : Cache × Feature) :
    (model.trainingTimeTest tokens state).2.length = tokens.length := by
  induction tokens generalizing state with
  | nil => rfl
  | cons token tokens ih =>
    rw [trainingTimeTest_cons, List.length_cons, List.length_cons, ih]

/-- **Append**: training-time test on `ts ++ us` runs `ts`, then `us` from the state `ts`
reached; the outputs are concatenated. -/
theorem trainingTimeTest_append (ts us : List Token) (state : Cache × Feature) :
    model.trainingTimeTest (ts ++ us) state =
      ((model.trainingTimeTest us (model.trainingTimeTest ts state).1).1,
        (model.trainingTimeTest ts state).2 ++
          (model.trainingTimeTest us (model.trainingTimeTest ts state).1).2) := by
  induction ts generalizing state with
  | nil => rfl
  | cons token ts ih =>
    rw [List.cons_append, trainingTimeTest_cons, ih, trainingTimeTest_cons, List.cons_append]

end SelfFeedingDraft

end KimiK3.Training
