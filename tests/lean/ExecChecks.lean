-- bundle: KimiK3.Core.Scalar KimiK3.Core.Kernel KimiK3.Sequence.Kernel KimiK3.Exec.Kernel
/-! Checks of the executable spec (`KimiK3.Exec`) at `Float`.

* the report's worked numbers, computed by hand (k3-spec §3 table): the toy expert
  `y ≈ −8.156066`, the KDA scalar rule `7.4`, order sensitivity `5.25` / `2.25`, the toy run `3`;
* the array-backed code against the function-backed reference (`KDA.step`, `Seq.softmax`,
  `Seq.rmsNorm`) on the same inputs: the equality theorems say the two agree at every scalar
  type, so at `Float` they must give the same bits. (Whole layers are compared with the
  reference through difftest's legs: the function-backed layers take minutes offline.) -/

open KimiK3

namespace KimiK3.ExecChecks

/-- `|a - b| ≤ tol`. -/
def near (a b tol : Float) : Bool := (if a ≤ b then b - a else a - b) ≤ tol

/-- Bitwise equality of two vectors of length `n` read through `f` and `g`. -/
def sameBits : Nat → (Nat → Float) → (Nat → Float) → Bool
  | 0, _, _ => true
  | n + 1, f, g => (f n).toBits == (g n).toBits && sameBits n f g

/-- A deterministic pseudo-random value in `[-1, 1)` (input filler). -/
def pseudo (seed i : Nat) : Float := Float.ofNat ((seed * 7919 + i * 104729 + 13) % 2000) / 1000 - 1

/-! ## Worked numbers -/

/-- The toy expert: `x = [1, 2]`, `G = I`, `U = diag(2, 3)`, `D = [[1], [−1]]`, caps 4 and 25. -/
def toyExpert : Exec.Expert Float 2 2 1 :=
  ⟨Exec.Arr.mat 2 2 (fun i j => if i = j then 1 else 0), Exec.Arr.mat 2 2 (fun i j => if i = j then Float.ofNat (i + 2) else 0),
   Exec.Arr.mat 2 1 (fun i _ => if i = 0 then 1 else -1)⟩

#guard near ((Exec.Expert.forwardF 2 2 1 toyExpert 4 25 (Exec.Arr.vec 2 (fun i => Float.ofNat (i + 1)))).get 0) (-8.156066) 1e-6

/-- The 1×1 KDA input with `k = q = 1`, retention `a`, value `v`, write strength `b`. -/
def scalarInput (a v b : Float) : Exec.KDA.Input Float 1 1 :=
  ⟨Exec.Arr.fill _ 1, Exec.Arr.fill _ 1, Exec.Arr.fill _ v, Exec.Arr.fill _ a, b⟩

#guard near ((Exec.KDA.step (Exec.Arr.fill [1, 1] 6) (scalarInput 0.8 10 0.5)).2.get 0) 7.4 1e-12

/-- The last readout of a 1×1 scan from 0 with `α = β = 0.5`. -/
def lastRead (vs : List Float) : Float :=
  (Exec.listGet (Exec.Arr.fill [1] 0) (Exec.KDA.runF 1 1 (Exec.Arr.fill [1, 1] 0)
    (Exec.listMap (fun v => scalarInput 0.5 v 0.5) vs)).2 (Exec.listLen vs - 1)).get 0

#guard lastRead [2, 10] == 5.25
#guard lastRead [10, 2] == 2.25

/-- The toy input: `q = k = [1, 0]`, `v = [3]`, retention `[1, 1]`, `β = 1`; from the zero 2×1 state
it reads `3`. -/
def toyInput : Exec.KDA.Input Float 2 1 :=
  ⟨Exec.Arr.vec 2 (fun i => if i = 0 then 1 else 0), Exec.Arr.vec 2 (fun i => if i = 0 then 1 else 0),
   Exec.Arr.fill _ 3, Exec.Arr.fill _ 1, 1⟩

#guard (Exec.KDA.step (Exec.Arr.fill [2, 1] 0) toyInput).2.get 0 == 3

/-! ## Array-backed = function-backed, bit for bit -/

def vecIn (seed n : Nat) : Exec.Arr Float [n] := Exec.Arr.vec n (pseudo seed)

#guard sameBits 7 (Exec.Arr.softmax (vecIn 1 7)).get (fun i => if h : i < 7 then Seq.softmax (vecIn 1 7).toTensor ⟨i, h⟩ else 0)
#guard sameBits 7 (Exec.Arr.rmsNorm 1e-5 (vecIn 2 7) (vecIn 3 7)).get
  (fun i => if h : i < 7 then Seq.rmsNorm 1e-5 (vecIn 2 7).toTensor (vecIn 3 7).toTensor ⟨i, h⟩ else 0)

/-- A KDA head input of widths 5 and 7. -/
def headIn (seed : Nat) : Exec.KDA.Input Float 5 7 :=
  ⟨Exec.Arr.l2Normalize 1e-6 (vecIn seed 5), Exec.Arr.l2Normalize 1e-6 (vecIn (seed + 1) 5), vecIn (seed + 2) 7,
   Exec.Arr.vec 5 (fun i => (pseudo (seed + 3) i + 3) / 4), 0.6⟩

/-- The same input, function-backed. -/
def headInSpec (seed : Nat) : KDA.Input Float 5 7 :=
  ⟨(headIn seed).query.toTensor, (headIn seed).key.toTensor, (headIn seed).value.toTensor,
   (headIn seed).retention.toTensor, (headIn seed).writeStrength⟩

def state0 : Exec.Arr Float [5, 7] := Exec.Arr.ofFn _ (pseudo 9)

#guard sameBits 35 (Exec.KDA.step state0 (headIn 4)).1.get
  (fun k => if h : k < 35 then (KDA.step state0.toTensor (headInSpec 4)).1 ⟨k / 7, by omega⟩ ⟨k % 7, Nat.mod_lt _ (by omega)⟩ else 0)
#guard sameBits 7 (Exec.KDA.step state0 (headIn 4)).2.get
  (fun c => if h : c < 7 then (KDA.step state0.toTensor (headInSpec 4)).2 ⟨c, h⟩ else 0)

end KimiK3.ExecChecks
