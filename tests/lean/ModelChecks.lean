-- bundle: KimiK3.Model.LanguageModel KimiK3.Model.Embedding
/-!
# The language model at `Float` on the tiny configuration (k3-spec §2.5)

A tiny model (`tinyConfig`: 5 layers, KDA 1–3, MLA 4–5, layer 1 dense, 2–5 Stable LatentMoE,
AttnRes block 3) with deterministic small weights: multimodal slots resolve to the visual row or
the token's embedding row. (A whole causal run of this function-backed model does not finish in
the offline interpreter in 15 minutes, measured 2026-12-01, so the run is not evaluated here:
`run_eq_logits` proves causal run = layer-major logits exactly over lawful scalars, and the
executable model (`lean/KimiK3/Exec/`, proved equal) is what evaluation runs.) Run by
`tests/test_lean_checks.py`.
-/
namespace KimiK3.ModelChecks
open KimiK3

/-- A deterministic small weight from a salt and two indices, in [-0.2, 0.2]. -/
def w (salt i j : Nat) : Float := (Float.ofNat ((i * 7 + j * 13 + salt * 5 + i * j) % 17) - 8.0) / 40.0

def t1 (salt : Nat) {n : Nat} : Tensor Float [n] := Seq.memoFn fun i => w salt i.val 3
def g1 (salt : Nat) {n : Nat} : Tensor Float [n] := Seq.memoFn fun i => 1.0 + w salt i.val 1
def t2 (salt : Nat) {m n : Nat} : Tensor Float [m, n] := Seq.memo2 fun i j => w salt i.val j.val
def t3 (salt : Nat) {a b e : Nat} : Tensor Float [a, b, e] :=
  Seq.memoFn fun i => Seq.memo2 fun j k => w salt (i.val * 5 + j.val) k.val

abbrev C : Config := tinyConfig

def kdaParams (salt : Nat) : KDA.LayerParams Float C.kdaDims where
  queryProj := t3 (salt + 1)
  keyProj := t3 (salt + 2)
  valueProj := t3 (salt + 3)
  queryConv := t3 (salt + 4)
  keyConv := t3 (salt + 5)
  valueConv := t3 (salt + 6)
  decayDown := t2 (salt + 7)
  decayUp := t3 (salt + 8)
  decayBias := t2 (salt + 14)
  decayLogScale := t1 (salt + 9)
  betaProj := t2 (salt + 10)
  gateWeight := t3 (salt + 11)
  outNormScale := g1 (salt + 12)
  outputProj := t3 (salt + 13)
  normEps := C.kdaOutputNormEps.toScalar
  queryScale := C.queryScale

def mlaParams (salt : Nat) : GatedMLA.Params Float C.mlaDims where
  queryDown := t2 (salt + 1)
  queryNormScale := g1 (salt + 2)
  kvDown := t2 (salt + 3)
  kvNormScale := g1 (salt + 4)
  sharedKeyDown := t2 (salt + 5)
  queryContentUp := t3 (salt + 6)
  querySharedUp := t3 (salt + 7)
  keyUp := t3 (salt + 8)
  valueUp := t3 (salt + 9)
  gateWeight := t3 (salt + 10)
  outputWeight := t3 (salt + 11)
  normEps := C.mlaLatentNormEps.toScalar

def expert (salt : Nat) {a h o : Nat} : Expert Float a h o := ⟨t2 (salt + 1), t2 (salt + 2), t2 (salt + 3)⟩

def moe (salt : Nat) : StableLatentMoE Float C.hiddenDim C.latentDim C.expertHiddenDim
    C.expertHiddenDim C.numSharedExperts C.numRoutedExperts where
  shared := fun i => expert (salt + 10 * i.val)
  downProject := t2 (salt + 31)
  routerWeight := t2 (salt + 32)
  routerBias := t1 (salt + 33)
  routed := fun e => expert (salt + 40 + 7 * e.val)
  routedNormScale := g1 (salt + 34)
  normEps := C.moeNormEps.toScalar
  routedScale := C.routedScale.toScalar
  upProject := t2 (salt + 35)

def layer (n : Nat) : BackboneLayer Float C where
  sequence := if n % 4 = 0 ∨ n = 5 then .mla (mlaParams (100 * n)) C.scoreScale
    else .kda (kdaParams (100 * n)) C.logFloor C.kdaL2Eps.toScalar
  channel := if n = 1 then .dense (expert (100 * n + 50)) else .moe (moe (100 * n + 60)) (by decide)
  sequenceQuery := t1 (100 * n + 91)
  channelQuery := t1 (100 * n + 92)
  sequenceNormScale := g1 (100 * n + 93)
  channelNormScale := g1 (100 * n + 94)
  retrievalEps := C.attnResEps.toScalar
  normEps := C.preNormEps.toScalar

def model : LanguageModel Float C where
  embedding := t2 7
  layers := [layer 1, layer 2, layer 3, layer 4, layer 5]
  finalQuery := t1 8
  finalNormScale := g1 9
  head := t2 10
  retrievalEps := C.attnResEps.toScalar
  normEps := C.finalNormEps.toScalar

-- multimodal slots: position 1 is visual row 1, the others text token 5
def visual : Tensor Float [2, C.hiddenDim] := t2 77
def slots : Fin 3 → InputSlot C.vocabSize 2 := fun p =>
  if p.val = 1 then .visual ⟨1, by decide⟩ else .text ⟨5, by decide⟩
#guard model.embedMultimodal visual slots ⟨1, by decide⟩ ⟨3, by decide⟩ == visual ⟨1, by decide⟩ ⟨3, by decide⟩
#guard model.embedMultimodal visual slots ⟨2, by decide⟩ ⟨3, by decide⟩ == model.embedding ⟨5, by decide⟩ ⟨3, by decide⟩
end KimiK3.ModelChecks
