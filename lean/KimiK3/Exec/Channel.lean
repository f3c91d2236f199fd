module

public import KimiK3.Exec.Ops
public import KimiK3.Channel.LatentMoE

/-!
# The executable channel mixers equal the reference (report §2.3, Eq. 11–13, 18–19)

Conversions `toSpec` from the array-backed structures to the reference ones, and, for every
`[Scalar α]`:

* `Exec.situ_eq`, `Exec.softCap_eq`: the scalar functions are the reference's;
* `Exec.Expert.forward_eq`: `toTensor (e.forward c_g c_u x) = e.toSpec.forward c_g c_u (toTensor x)`;
* `Exec.routerScores_eq`, `Exec.adjustedScores_eq`: the router scores;
* `Exec.countTo_eq`, `Exec.findFrom_eq`, `Exec.beats_eq`: the counting and search loops;
* `Exec.topK_eq`: the executable route is `Routing.topKSlots`, slot by slot;
* `Exec.mixtureWeights_eq`: the mixture weights of a route;
* `Exec.StableLatentMoE.sharedOutput_eq`, `routedAggregate_eq`, `forward_eq` (any route whose
  entries are expert indices), `route_eq`, and **`forwardAuto_eq`**: the layer with its own
  routing is `StableLatentMoE.forwardAuto`.
-/

@[expose] public section

namespace KimiK3

namespace Exec

variable {α : Type} [Scalar α]

theorem softCap_eq (cap x : α) : softCap cap x = KimiK3.softCap cap x := rfl

theorem situ_eq (gateCap upCap gate up : α) :
    situ gateCap upCap gate up = SiTU.scalar gateCap upCap gate up := rfl

/-! ## The expert -/

/-- The reference expert of an array-backed one. -/
noncomputable def Expert.toSpec {d h o : Nat} (e : Expert α d h o) : KimiK3.Expert α d h o :=
  ⟨e.gateWeight.toTensor, e.upWeight.toTensor, e.downWeight.toTensor⟩

/-- **The executable expert is `Expert.forward`.** -/
theorem Expert.forward_eq {d h o : Nat} (e : Expert α d h o) (gateCap upCap : α) (x : Arr α [d]) :
    (e.forward gateCap upCap x).toTensor = e.toSpec.forward gateCap upCap x.toTensor := by
  unfold Expert.forward KimiK3.Expert.forward
  rw [Arr.toTensor_vecMatMul]
  congr 1
  funext j
  simp [Arr.vecMatMul, Tensor.vecMatMul, sumTo_eq, SiTU.vector, situ_eq, Expert.toSpec]

/-- The reference experts of a stack. -/
noncomputable def Experts.toSpec {n d h o : Nat} (es : Experts α n d h o) : Fin n → KimiK3.Expert α d h o :=
  fun i => (es.get i.val).toSpec

theorem Experts.get_toSpec {n d h o : Nat} (es : Experts α n d h o) (i : Fin n) :
    (es.get i.val).toSpec = es.toSpec i := rfl

/-! ## The router -/

theorem routerScores_eq {d E : Nat} (routerWeight : Arr α [d, E]) (x : Arr α [d]) :
    (routerScores routerWeight x).toTensor = Router.scores routerWeight.toTensor x.toTensor := by
  funext e
  simp [routerScores, Router.scores, Arr.vecMatMul, Tensor.vecMatMul, sumTo_eq]

theorem adjustedScores_eq {E : Nat} (rawScores bias : Arr α [E]) :
    (adjustedScores rawScores bias).toTensor = Router.adjusted rawScores.toTensor bias.toTensor := by
  funext e
  simp [adjustedScores, Router.adjusted]

theorem countFrom_finCount (p : Nat → Bool) (k i : Nat) :
    countFrom p k i (finCount i (fun j => p j.val)) = finCount (i + k) (fun j => p j.val) := by
  induction k generalizing i with
  | zero => rfl
  | succ k ih =>
    show countFrom p k (i + 1) (finCount (i + 1) (fun j => p j.val)) = _
    rw [ih, show i + 1 + k = i + (k + 1) by omega]

/-- The counting loop is `finCount`. -/
theorem countTo_eq (n : Nat) (p : Nat → Bool) : countTo n p = finCount n (fun i => p i.val) := by
  have h := countFrom_finCount p n 0
  rw [Nat.zero_add] at h
  exact h

/-- The search loop is `findFin`. -/
theorem findFrom_eq (p : Nat → Bool) (k i : Nat) :
    findFrom p k i = (findFin k (fun e => p (i + e.val))).map (fun e => i + e.val) := by
  induction k generalizing i with
  | zero => rfl
  | succ k ih =>
    simp only [findFrom, findFin, Nat.add_zero]
    by_cases h : p i
    · simp [h]
    · simp only [h, if_false, Bool.false_eq_true]
      rw [ih]
      cases hf : findFin k (fun e => p (i + (e.val + 1))) with
      | none =>
        have : findFin k (fun e => p (i + 1 + e.val)) = none := by
          rw [← hf]; congr 1; funext e; congr 1; omega
        simp [this]
      | some e =>
        have : findFin k (fun e => p (i + 1 + e.val)) = some e := by
          rw [← hf]; congr 1; funext e; congr 1; omega
        simp only [this, Option.map_some]
        congr 1; omega

theorem beats_eq {E : Nat} (score : Arr α [E]) (a b : Fin E) :
    beats score a.val b.val = decide (Routing.Beats score.toTensor a b) := by
  simp [beats, Routing.Beats]

/-- **The executable route is `Routing.topKSlots`**, slot by slot. -/
theorem topK_eq {E k : Nat} (score : Arr α [E]) (hk : k ≤ E) (i : Fin k) :
    arrayGetD (topK k score) i.val 0 = (Routing.topKSlots score.toTensor hk i).val := by
  unfold topK Routing.topKSlots Routing.expertOfRank
  rw [arrayGetD_arrayOfFn, if_pos i.isLt, memoNat_eq]
  simp only
  rw [findFrom_eq]
  have hp : (fun e : Fin E => arrayGetD (arrayOfFn E (fun e => countTo E (fun x => beats score x e)))
      (0 + e.val) 0 == i.val) = (fun e => Routing.rank score.toTensor e == i.val) := by
    funext e
    rw [Nat.zero_add, arrayGetD_arrayOfFn, if_pos e.isLt, countTo_eq]
    unfold Routing.rank
    congr 2
    funext x
    exact beats_eq score x e
  rw [hp]
  cases findFin E (fun e => Routing.rank score.toTensor e == i.val) with
  | none => rfl
  | some e => simp

/-- The route of slot `i` as an expert index (`Fin E`), given that it is one. -/
noncomputable def routeSlot {E k : Nat} (route : Array Nat) (h : ∀ i : Fin k, arrayGetD route i.val 0 < E) :
    Fin k → Fin E :=
  fun i => ⟨arrayGetD route i.val 0, h i⟩

theorem topK_lt {E k : Nat} (score : Arr α [E]) (hk : k ≤ E) (i : Fin k) :
    arrayGetD (topK k score) i.val 0 < E := by
  rw [topK_eq score hk]; exact Fin.isLt _

theorem routeSlot_topK {E k : Nat} (score : Arr α [E]) (hk : k ≤ E) :
    routeSlot (topK k score) (topK_lt score hk) = Routing.topKSlots score.toTensor hk := by
  funext i; exact Fin.ext (topK_eq score hk i)

theorem mixtureWeights_eq {E k : Nat} (rawScores : Arr α [E]) (route : Array Nat)
    (h : ∀ i : Fin k, arrayGetD route i.val 0 < E) :
    (mixtureWeights k rawScores route).toTensor = Router.mixtureWeights rawScores.toTensor (routeSlot route h) := by
  funext i
  simp [mixtureWeights, Router.mixtureWeights, routeSlot, sumTo_eq]

/-! ## Stable LatentMoE -/

namespace StableLatentMoE

variable {d l hs hr S E : Nat}

/-- The reference layer of an array-backed one. -/
noncomputable def toSpec (moe : StableLatentMoE α d l hs hr S E) : KimiK3.StableLatentMoE α d l hs hr S E :=
  ⟨moe.shared.toSpec, moe.downProject.toTensor, moe.routerWeight.toTensor, moe.routerBias.toTensor,
   moe.routed.toSpec, moe.routedNormScale.toTensor, moe.normEps, moe.routedScale,
   moe.upProject.toTensor⟩

theorem sharedOutput_eq (moe : StableLatentMoE α d l hs hr S E) (gateCap upCap : α) (x : Arr α [d]) :
    (moe.sharedOutput gateCap upCap x).toTensor = moe.toSpec.sharedOutput gateCap upCap x.toTensor := by
  funext c
  simp only [sharedOutput, KimiK3.StableLatentMoE.sharedOutput, Arr.toTensor_apply1,
    Arr.get_vec _ c.isLt, sumTo_eq]
  congr 1
  funext i
  rw [arrayGetD_arrayOfFn, if_pos i.isLt, ← Arr.toTensor_apply1, Expert.forward_eq]
  rfl

theorem routedAggregate_eq (moe : StableLatentMoE α d l hs hr S E) (k : Nat) (route : Array Nat)
    (h : ∀ i : Fin k, arrayGetD route i.val 0 < E) (gateCap upCap : α) (x : Arr α [d]) :
    (moe.routedAggregate k route gateCap upCap x).toTensor =
      moe.toSpec.routedAggregate (routeSlot route h) gateCap upCap x.toTensor := by
  funext c
  simp only [routedAggregate, KimiK3.StableLatentMoE.routedAggregate, Arr.toTensor_apply1,
    Arr.get_vec _ c.isLt, sumTo_eq]
  congr 1
  funext i
  rw [arrayGetD_arrayOfFn, if_pos i.isLt,
    ← Arr.toTensor_apply1 (mixtureWeights k (routerScores moe.routerWeight x) route) i, mixtureWeights_eq _ _ h,
    routerScores_eq, ← Arr.toTensor_apply1 ((moe.routed.get (arrayGetD route i.val 0)).forward _ _ _) c,
    Expert.forward_eq, Arr.toTensor_vecMatMul]
  rfl

/-- **The layer for a given route** is `StableLatentMoE.forward` at that route. -/
theorem forward_eq (moe : StableLatentMoE α d l hs hr S E) (k : Nat) (route : Array Nat)
    (h : ∀ i : Fin k, arrayGetD route i.val 0 < E) (gateCap upCap : α) (x : Arr α [d]) :
    (moe.forward k route gateCap upCap x).toTensor =
      moe.toSpec.forward (routeSlot route h) gateCap upCap x.toTensor := by
  funext c
  simp only [forward, KimiK3.StableLatentMoE.forward, Arr.toTensor_apply1, Arr.get_vec _ c.isLt]
  rw [← Arr.toTensor_apply1, sharedOutput_eq, ← Arr.toTensor_apply1, Arr.toTensor_vecMatMul,
    Arr.toTensor_rmsNorm, routedAggregate_eq _ _ _ h]
  rfl

theorem route_lt (moe : StableLatentMoE α d l hs hr S E) {k : Nat} (hk : k ≤ E) (x : Arr α [d])
    (i : Fin k) : arrayGetD (moe.route k x) i.val 0 < E :=
  topK_lt _ hk i

/-- **The executable route is the layer's route** `StableLatentMoE.route`. -/
theorem route_eq (moe : StableLatentMoE α d l hs hr S E) {k : Nat} (hk : k ≤ E) (x : Arr α [d]) :
    routeSlot (moe.route k x) (moe.route_lt hk x) = moe.toSpec.route hk x.toTensor := by
  unfold route KimiK3.StableLatentMoE.route KimiK3.StableLatentMoE.adjustedRouterScores
    KimiK3.StableLatentMoE.rawScores
  rw [routeSlot_topK, adjustedScores_eq, routerScores_eq]
  rfl

/-- **The executable layer with its own routing is `StableLatentMoE.forwardAuto`.** -/
theorem forwardAuto_eq (moe : StableLatentMoE α d l hs hr S E) {k : Nat} (hk : k ≤ E)
    (gateCap upCap : α) (x : Arr α [d]) :
    (moe.forwardAuto k gateCap upCap x).toTensor = moe.toSpec.forwardAuto hk gateCap upCap x.toTensor := by
  unfold forwardAuto KimiK3.StableLatentMoE.forwardAuto
  rw [forward_eq moe k _ (moe.route_lt hk x), route_eq]

end StableLatentMoE

end Exec

end KimiK3
