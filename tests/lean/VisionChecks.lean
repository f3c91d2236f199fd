-- bundle: KimiK3.Vision.Config KimiK3.Vision.Splice
/-!
# Vision: MoonViT-V2's reference pieces at `Float`, against independent values

Expected values: `erf`, `sin`, `cos`, the time and RoPE frequencies from Python's `math` (C's
libm); the tanh and erf GELUs from `torch.nn.functional.gelu` (float64); the bilinear matrices from
`torch.nn.functional.interpolate(mode="bilinear", align_corners=False)` on identity tables (and by
hand from the half-pixel rule); the merge, the one-token block and the splice by hand (comments).
Run by `tests/test_lean_checks.py`.
-/

namespace KimiK3.VisionCheck

open Vision

/-- `|a − b| ≤ tol`. -/
def near (tol a b : Float) : Bool := Float.abs (a - b) ≤ tol

-- erf (binary64, `FloatOps.erf`) against `math.erf`, within 1e-16 or 2e-16 (1–2 ulps here)
#guard near 1e-16 (TrigScalar.erf (0.5 : Float)) 0.5204998778130465
#guard near 2e-16 (TrigScalar.erf (1 : Float)) 0.8427007929497149
#guard near 2e-16 (TrigScalar.erf (2 : Float)) 0.9953222650189527
#guard near 2e-16 (TrigScalar.erf (-1.5 : Float)) (-0.9661051464753108)
#guard near 2e-16 (TrigScalar.erf (3.2 : Float)) 0.9999939742388483
#guard TrigScalar.erf (7 : Float) == 1
#guard TrigScalar.erf (0 : Float) == 0
#guard (TrigScalar.erf (0.0 / 0.0 : Float)).isNaN
#guard near 1e-7 (TrigScalar.erf (1 : Float32)).toFloat 0.8427007929497149
#guard near 1e-16 (TrigScalar.sin (1 : Float)) 0.8414709848078965
#guard near 1e-16 (TrigScalar.cos (1 : Float)) 0.5403023058681398

-- GELUs against torch (float64): tanh form at 1, -0.5, 2; erf form likewise
#guard near 1e-15 (geluTanh (1 : Float)) 0.8411919906082768
#guard near 1e-15 (geluTanh (-0.5 : Float)) (-0.15428599017485606)
#guard near 1e-15 (geluTanh (2 : Float)) 1.954597694087775
#guard near 1e-15 (geluErf (1 : Float)) 0.841344746068543
#guard near 1e-15 (geluErf (-0.5 : Float)) (-0.15426876936299344)
#guard near 1e-15 (geluErf (2 : Float)) 1.9544997361036416

/-- `f 0 && … && f (n − 1)` (own recursion: `List.all` does not compile offline). -/
def allBelow : Nat → (Nat → Bool) → Bool
  | 0, _ => true
  | n + 1, f => allBelow n f && f n

/-- Entry `i` of a list (`0` past its end). -/
def getD : List Float → Nat → Float
  | [], _ => 0
  | x :: _, 0 => x
  | _ :: xs, i + 1 => getD xs i

/-- Row `i` of a list of rows. -/
def getRow : List (List Float) → Nat → List Float
  | [], _ => []
  | r :: _, 0 => r
  | _ :: rs, i + 1 => getRow rs i

/-- A `[n, m]` matrix equals the row lists entrywise within `1e-15`. -/
def matNear (n m : Nat) (w : Tensor Float [n, m]) (expected : List (List Float)) : Bool :=
  allBelow n (fun o => allBelow m (fun i =>
    if h : o < n ∧ i < m then near 1e-15 (w ⟨o, h.1⟩ ⟨i, h.2⟩) (getD (getRow expected o) i) else false))

-- bilinear, half-pixel: 4 table rows to 6 (upsampling; by hand output o reads the source
-- ((2o+1)·4 − 6)/12 clamped at 0 = 0, 1/2, 7/6, 11/6, 5/2, 19/6, the last one the last row twice)
#guard matNear 6 4 (weightMatrix 4 6)
  [[1, 0, 0, 0], [0.5, 0.5, 0, 0], [0, 5 / 6, 1 / 6, 0], [0, 1 / 6, 5 / 6, 0], [0, 0, 0.5, 0.5], [0, 0, 0, 1]]
-- 6 table rows to 4 (downsampling; sources 1/4, 7/4, 13/4, 19/4)
#guard matNear 4 6 (weightMatrix 6 4)
  [[0.75, 0.25, 0, 0, 0, 0], [0, 0.25, 0.75, 0, 0, 0], [0, 0, 0, 0.75, 0.25, 0], [0, 0, 0, 0, 0.25, 0.75]]
-- the table's own size: the identity
#guard matNear 3 3 (weightMatrix 3 3) [[1, 0, 0], [0, 1, 0], [0, 0, 1]]

-- time table, tiny width D = 20 (half 10): ω_1 = 10^(-4/10) = 0.3981071705534972
#guard near 1e-15 (timeTable (α := Float) 4 20 1 0) 0.8414709848078965    -- sin(1·ω_0) = sin 1
#guard near 1e-15 (timeTable (α := Float) 4 20 1 10) 0.5403023058681398   -- cos(1·ω_0) = cos 1
#guard near 1e-15 (timeTable (α := Float) 4 20 2 1) 0.7147134629637895    -- sin(2·ω_1)
#guard near 1e-15 (timeTable (α := Float) 4 20 2 11) 0.6994173760054206   -- cos(2·ω_1)
#guard timeTable (α := Float) 4 20 0 3 == 0 && timeTable (α := Float) 4 20 0 13 == 1

-- RoPE (R = 3): pair 4 ≥ R turns by the column at ω_1 = 10⁴^(-1/3); pair 1 by the row
#guard near 1e-15 (ropeAngle (10000 : Float) 3 2 5 4) 0.232079441680639
#guard near 1e-15 (ropeAngle (10000 : Float) 3 2 5 1) (2 * 0.046415888336127795)

/-- A clip of 2 frames on a 4 × 4 grid, width 2: `x[l, d] = 100·l + d`. -/
def clip : Tensor Float [2 * ((2 * 2) * (2 * 2)), 2] := fun l d => 100 * l.val.toFloat + d.val.toFloat

-- temporal mean then 2 × 2 merge: merged token 1 = (a, b) = (0, 1), channel (dh·2 + dw)·2 + c with
-- dh = 1, dw = 0, c = 1 is channel 5 = pixel (1, 2), token 6 of each frame:
-- ((100·6 + 1) + (100·22 + 1)) / 2 = 1401
#guard spaceToDepth (h' := 2) (w' := 2) (mH := 2) (mW := 2) (temporalMean clip) 1 5 == 1401
-- merged token 2 = (1, 0), channel (0·2 + 1)·2 + 0 = 2: pixel (2, 1), token 9: (900 + 2500) / 2
#guard spaceToDepth (h' := 2) (w' := 2) (mH := 2) (mW := 2) (temporalMean clip) 2 2 == 1700
-- merged token 3 = (1, 1), channel 7 = (dh, dw, c) = (1, 1, 1): pixel (3, 3), token 15: (1501 + 3101) / 2
#guard spaceToDepth (h' := 2) (w' := 2) (mH := 2) (mW := 2) (temporalMean clip) 3 7 == 2301

/-- A block of width 2, one head of one rotary frequency per axis (head `[2, 2]`), value width 1,
MLP 1 with `fc1 = 0`: on one token it is `x + (RMSNorm(x)·Wv)·Wo`. -/
def oneBlock : Block Float 2 1 1 1 1 where
  norm0 := fun _ => 1
  query := fun _ _ _ _ => 0.3
  key := fun _ _ _ _ => -0.2
  value := fun _ _ _ => 1
  output := fun _ _ e => if e.val = 0 then 1 else 2
  norm1 := fun _ => 1
  fc0 := fun _ _ => 1
  fc1 := fun _ _ => 0

-- x = [3, 4], ε = 0: RMSNorm(x) = x/√12.5, v = 7/√12.5 = 1.9798989873223332, out = x + v·[1, 2]
#guard near 1e-14 (oneBlock.forward 0 0.5 (fun _ _ => 1) (fun _ _ => 0) (L := 1) (fun _ d => if d.val = 0 then 3 else 4) 0 0)
  4.979898987322333
#guard near 1e-14 (oneBlock.forward 0 0.5 (fun _ _ => 1) (fun _ _ => 0) (L := 1) (fun _ d => if d.val = 0 then 3 else 4) 0 1)
  7.959797974644667

-- splice: placeholder id 7 in [1, 7, 7, 2, 7] (3 placeholders, one 2 × 6 clip merged to 1 × 3)
/-- The prompt. -/
def prompt : List (Fin 10) := [1, 7, 7, 2, 7]
#guard placeholderCount 7 prompt == 3
#guard visualRows (splice (N := 3) 7 prompt (by decide)) == [0, 1, 2]
#guard textTokens (splice (N := 3) 7 prompt (by decide)) == [1, 2]

-- parameter counts (also theorems: `paper_encoder_params`, `paper_divided_encoder_params`)
#guard countAll (encoderShapes paperConfig paperVision) == 401214464
#guard countAll (dividedEncoderShapes paperConfig paperVision) == 571111424
#guard countAll (projectorShapes paperConfig paperVision) == 46144512

end KimiK3.VisionCheck
