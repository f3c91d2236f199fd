module

public import KimiK3.Sequence.Kernel

/-!
# Executable kernel of Block Attention Residuals (report §2.2, Eq. 8–10; k3-spec §2.4)

The depth state of one token and its two operations: retrieval (attention over the depth
sources with a learned, input-independent query) and the per-layer commit.

**Decisions where the report is silent** (the same as `pybridge/attnres.py`, which follows the
public `_forward_attn_residual`):
* an *empty* partial block (count 0) is not a source;
* the channel-mixer retrieval sees the partial sum with the sequence output already added,
  `P + seqOut` (or `seqOut` alone when the partial block is empty), not `seqOut` as an extra
  source;
* a layer commits `P ← (P + seqOut) + chanOut` once; when the partial block reaches the block
  size it is appended to the completed blocks and the partial block becomes empty;
* scores use RMSNorm with unit gain and stabilizer `eps`; there is no `1/√d` scaling.

These definitions are `@[macro_inline]` and have no `Float` entry points here (why:
`Core/README.md`, "Toolchain constraints").
-/

@[expose] public section

namespace KimiK3

namespace AttnRes

variable {α : Type} [Scalar α]

/-- **Depth attention over packed sources** (report Eq. 9–10, k3-spec §2.4): with rows `v_i`
of `values : [n, d]` and the learned query `w`,
`score_i = w · RMSNorm(v_i)` (unit gain, stabilizer `eps`), `a = softmax(score)` and
`h = Σ_i a_i v_i` — the **un-normalized** sources are mixed. -/
@[macro_inline] def attendPacked {n d : Nat} (eps : α) (query : Tensor α [d])
    (values : Tensor α [n, d]) : Tensor α [d] :=
  let scores := Seq.memoFn (fun i => Seq.dot query (Seq.rmsNorm eps (values i) (fun _ => 1)))
  let weights := Seq.memoFn (Seq.softmax scores)
  fun k => Seq.sum n (fun i => weights i * values i k)

/-- The list of sources packed as the rows of a `[length, d]` tensor. -/
@[macro_inline] def pack {d : Nat} (sources : List (Tensor α [d])) :
    Tensor α [Seq.listLen sources, d] :=
  fun i => Seq.listGet (fun _ => 0) sources i.val

/-- Depth attention over a list of sources: `attendPacked` of the packed list. -/
@[macro_inline] def attendList {d : Nat} (eps : α) (query : Tensor α [d])
    (sources : List (Tensor α [d])) : Tensor α [d] :=
  attendPacked eps query (pack sources)

end AttnRes

/-- **The depth state of one token** (k3-spec §2.4): the embedding (always source 0), the
completed block sums (oldest first), and the partial sum of the unfinished block with the number
of layers it holds. Well-formed (`BlockState.WF`) when that number is below the block size. -/
structure BlockState (α : Type) (d : Nat) where
  /-- The token's embedding, source 0. -/
  embedding : Tensor α [d]
  /-- The completed block sums, oldest first. -/
  blocks : List (Tensor α [d])
  /-- The sum of the outputs of the layers of the unfinished block (zero when it is empty). -/
  partialSum : Tensor α [d]
  /-- The number of layers in the unfinished block. -/
  count : Nat

namespace BlockState

variable {α : Type} [Scalar α] {d : Nat}

/-- The state before the first layer: only the embedding (k3-spec §2.5, `initialDepthState`). -/
@[macro_inline] def initial (embedding : Tensor α [d]) : BlockState α d :=
  ⟨embedding, [], fun _ => 0, 0⟩

/-- The sources a retrieval reads: the embedding, the completed blocks, and the partial block
when it is not empty. -/
@[macro_inline] def sources (s : BlockState α d) : List (Tensor α [d]) :=
  s.embedding :: Seq.listAppend s.blocks (if s.count = 0 then [] else [s.partialSum])

/-- The partial block with the sequence output added: `P + seqOut`, or `seqOut` alone when the
block is empty. -/
@[macro_inline] def afterSequence (s : BlockState α d) (seqOut : Tensor α [d]) : Tensor α [d] :=
  if s.count = 0 then seqOut else fun k => s.partialSum k + seqOut k

/-- **Retrieval** with the learned query `w` (report Eq. 9–10): attention over `sources`. -/
@[macro_inline] def retrieve (eps : α) (query : Tensor α [d]) (s : BlockState α d) : Tensor α [d] :=
  AttnRes.attendList eps query s.sources

/-- The channel mixer's retrieval: the completed sources and the partial block with the
sequence output added (k3-spec §2.5, `retrieveAfterSequence`). -/
@[macro_inline] def retrieveAfterSequence (eps : α) (query : Tensor α [d]) (s : BlockState α d)
    (seqOut : Tensor α [d]) : Tensor α [d] :=
  AttnRes.attendList eps query (s.embedding :: Seq.listAppend s.blocks [s.afterSequence seqOut])

/-- **The commit of one layer** (k3-spec §2.5): `P ← (P + seqOut) + chanOut` and one more layer
in the partial block; a block that reaches `blockSize` layers moves to the completed list and
the partial block starts empty. -/
@[macro_inline] def finishLayer (blockSize : Nat) (s : BlockState α d) (seqOut chanOut : Tensor α [d]) :
    BlockState α d :=
  let p : Tensor α [d] := fun k => s.afterSequence seqOut k + chanOut k
  if s.count + 1 = blockSize then ⟨s.embedding, Seq.listAppend s.blocks [p], fun _ => 0, 0⟩
  else ⟨s.embedding, s.blocks, p, s.count + 1⟩

/-- The sources of the channel mixer's retrieval: the embedding, the completed blocks, and the
partial block with the sequence output added (`retrieveAfterSequence` attends over them). -/
@[macro_inline] def sourcesAfterSequence (s : BlockState α d) (seqOut : Tensor α [d]) :
    List (Tensor α [d]) :=
  s.embedding :: Seq.listAppend s.blocks [s.afterSequence seqOut]

/-- Commit the layers whose outputs are `outs` (pairs `(seqOut, chanOut)`, first layer first),
one `finishLayer` each. -/
@[macro_inline] def commitAll (blockSize : Nat) (s : BlockState α d)
    (outs : List (Tensor α [d] × Tensor α [d])) : BlockState α d :=
  outs.foldl (fun t o => t.finishLayer blockSize o.1 o.2) s

/-- Well-formedness for block size `blockSize`: the partial block is not full. -/
def WF (blockSize : Nat) (s : BlockState α d) : Prop := s.count < blockSize

end BlockState

end KimiK3
