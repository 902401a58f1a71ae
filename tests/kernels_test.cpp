// Differential tests: every optimized kernel against the reference kernel (the oracle), on a
// table of hand-picked shapes (sizes 1, odd sizes, empty tensors, every Add path, broadcast
// batches, negative dims, shapes large enough to split into tasks) plus deterministic random
// shapes, over every dtype. Also: index errors, the per-shape compile decisions, kernel names,
// key hashing, and shape-generic specs.
#include "executor/kernels.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unordered_set>

#include "compiler/kernel_spec.h"
#include "executor/fork_join.h"
#include "executor/kernels/common.h"
#include "executor/transpose_stream.h"
#include "graph/error.h"

namespace gearbox {
namespace {

// ---- case table -----------------------------------------------------------------------------

struct OpCase {
  std::string name;
  OpKind kind = OpKind::kAdd;
  DType dtype = DType::kF32;
  std::vector<Shape> shapes;  // data inputs; the index (gather ops) is added from indexCount
  std::optional<int64_t> dim;
  DType indexType = DType::kI64;
  int64_t indexCount = 0;
  bool large = false;  // big enough that the compile step must split it into tasks
  uint64_t seed = 1;
  std::optional<Shape> shape = std::nullopt;  // reshape's target
  std::optional<Shape> perm = std::nullopt;   // transpose's permutation
  Attrs typed = {};                           // Int/Ints/Float attributes (conv2d, pools, mean)

  Attrs attrs() const {
    Attrs a = typed;
    a.dim = dim;
    a.shape = shape;
    a.perm = perm;
    return a;
  }
};

std::string caseName(const OpCase& c) {
  std::string s = fmt::format("{}_{}_{}", opKernelName(c.kind), dtypeName(c.dtype), c.name);
  if (c.kind == OpKind::kIndexSelect || c.kind == OpKind::kCatGather || c.kind == OpKind::kGather)
    s += fmt::format("_idx{}", dtypeName(c.indexType));
  return s;
}

// gtest prints a failing case's parameter; without this it would be a byte dump.
void PrintTo(const OpCase& c, std::ostream* os) {
  *os << caseName(c) << " inputs";
  for (const Shape& s : c.shapes) *os << ' ' << s.toString();
  if (c.dim) *os << " dim " << *c.dim;
  if (c.shape) *os << " shape " << c.shape->toString();
  if (c.perm) *os << " perm " << c.perm->toString();
  *os << formatAttrs(c.kind, c.typed);
  if (c.indexCount) *os << " index count " << c.indexCount;
}

// Deterministic pseudo-random numbers (splitmix64) for shapes, dims and index values.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi].
  int64_t uniform(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool chance(int oneIn) { return next() % oneIn == 0; }

 private:
  uint64_t s_;
};

// A random dim: mostly small odd and even sizes, sometimes 1, rarely 0.
int64_t randomDim(Rng& rng) {
  if (rng.chance(24)) return 0;
  if (rng.chance(5)) return 1;
  return rng.uniform(2, 9);
}

Shape randomShape(Rng& rng, int minRank, int maxRank) {
  Shape s;
  const int r = static_cast<int>(rng.uniform(minRank, maxRank));
  for (int i = 0; i < r; ++i) s.push(randomDim(rng));
  return s;
}

// An operand broadcastable to `out`: some dims become 1, some leading dims are dropped.
Shape broadcastOperand(Rng& rng, const Shape& out) {
  Shape s;
  const int drop = rng.chance(3) ? static_cast<int>(rng.uniform(0, out.rank())) : 0;
  for (int i = drop; i < out.rank(); ++i) s.push(rng.chance(3) ? 1 : out[i]);
  return s;
}

// Attention (the fused op of fuse-attention): with and without masks of each broadcast kind,
// sizes 1 and odd, no keys, decode's single query, a causal mask with -inf (and a row masked
// entirely, NaN as the unfused softmax gives), a rank-2 case and a shape that splits into tasks.
// A handful on purpose: the reference is O(S_q S_k (D + D_v)) loops, and ASan runs every case.
std::vector<OpCase> attentionCases() {
  auto make = [](std::string name, Shape q, int64_t sk, int64_t dv, std::optional<Shape> mask,
                 double scale = 0.35, bool large = false) {
    const int r = q.rank();
    Shape k = q, v = q;
    k[r - 2] = sk;
    v[r - 2] = sk;
    v[r - 1] = dv;
    OpCase c{std::move(name), OpKind::kAttention, DType::kF32, {q, k, v}, {}};
    if (mask) c.shapes.push_back(*mask);
    c.typed.setFloat(attr::Attention::scale, scale);
    c.large = large;
    return c;
  };
  return {
      make("plain", {2, 3, 5, 4}, 7, 6, std::nullopt),
      make("one", {1, 1}, 1, 1, std::nullopt, 1.0),
      make("padding_mask", {2, 3, 5, 4}, 7, 4, Shape{2, 1, 1, 7}),
      make("causal", {1, 2, 5, 3}, 5, 3, Shape{5, 5}),
      make("causal_empty_row", {2, 6, 4}, 6, 5, Shape{6, 6}),
      make("decode", {2, 4, 1, 8}, 9, 8, Shape{2, 1, 1, 9}),
      make("key_column_mask", {3, 5, 2}, 3, 1, Shape{5, 1}, -2.0),
      make("full_mask", {2, 2, 3, 5}, 4, 3, Shape{2, 2, 3, 4}),
      make("no_keys", {2, 3, 4}, 0, 2, Shape{3, 0}),
      make("no_head_size", {2, 3, 0}, 4, 2, std::nullopt),
      make("large", {1, 4, 128, 32}, 128, 32, Shape{128, 128}, 0.17677669529663687, true),
  };
}

constexpr DType kAllDTypes[] = {DType::kF32, DType::kI32, DType::kI64};
constexpr DType kIndexTypes[] = {DType::kI32, DType::kI64};

std::vector<OpCase> addCases() {
  struct Fixed {
    const char* name;
    Shape a, b;
    bool large = false;
  };
  const Fixed fixed[] = {
      {"same_2x3", {2, 3}, {2, 3}},
      {"same_numel_rank_mismatch", {1, 1, 7}, {7}},
      {"scalar_b", {4, 5}, {}},
      {"scalar_a", {1}, {3, 7}},
      {"scalar_both", {}, {}},
      {"ones", {1, 1}, {1}},
      {"row_b", {6, 5}, {5}},
      {"row_a", {1, 5}, {6, 5}},
      {"row_b_two_dims", {3, 4, 5}, {1, 4, 5}},
      {"general_outer", {3, 1}, {1, 4}},
      {"general_mid", {2, 1, 4}, {1, 3, 4}},
      {"general_rank_mismatch", {5, 1, 3}, {4, 1}},
      {"general_column", {6, 5}, {6, 1}},
      {"zero_size", {0, 3}, {3}},
      {"zero_general", {2, 0, 1}, {1, 3}},
      {"rank6", {2, 1, 3, 1, 2, 3}, {1, 2, 1, 2, 1, 3}},
      {"large_same", {700001}, {700001}, true},
      // 8.4 MB output of 4108-byte rows: streaming stores with unaligned row heads.
      {"large_row_streaming", {2048, 1027}, {1027}, true},
      {"large_general", {512, 1, 1024}, {1, 3, 1024}, true},
  };
  std::vector<OpCase> cases;
  for (DType t : kAllDTypes) {
    for (const Fixed& f : fixed) {
      // Large shapes check the task split; the other dtypes run the same loops on small ones.
      if (f.large && t != DType::kF32) continue;
      cases.push_back({f.name, OpKind::kAdd, t, {f.a, f.b}, {}, DType::kI64, 0, f.large});
    }
    Rng rng(100 + static_cast<int>(t));
    for (int i = 0; i < 12; ++i) {
      const Shape out = randomShape(rng, 0, 4);
      cases.push_back({fmt::format("random{}", i),
                       OpKind::kAdd,
                       t,
                       {broadcastOperand(rng, out), broadcastOperand(rng, out)},
                       {}});
    }
  }
  return cases;
}

std::vector<OpCase> matmulCases() {
  struct Fixed {
    const char* name;
    Shape a, b;
    bool large = false;
  };
  const Fixed fixed[] = {
      {"1x1", {1, 1}, {1, 1}},
      {"outer_product", {5, 1}, {1, 4}},
      {"dot", {1, 5}, {5, 1}},
      {"3x5x7", {3, 5}, {5, 7}},
      {"coeff_based", {7, 6}, {6, 6}},  // m + n + k = 19: Eigen's coefficient-based product
      {"packed_gemm", {7, 7}, {7, 6}},  // m + n + k = 20: the packed GEMM
      {"odd_33x65x17", {33, 65}, {65, 17}},
      {"batched", {2, 3, 4}, {2, 4, 5}},
      {"broadcast_batch", {2, 1, 3, 4}, {5, 4, 6}},
      {"fold_batch_into_m", {4, 3, 5}, {5, 2}},
      {"a_broadcast_over_b_batch", {3, 4}, {2, 4, 5}},
      {"batch_of_one", {1, 3, 4}, {3, 4, 2}},
      {"zero_m", {0, 4}, {4, 3}},
      {"zero_k", {3, 0}, {0, 4}},
      {"zero_batch", {0, 2, 3}, {3, 4}},
      {"large_row_split", {192, 256}, {256, 160}, true},
      {"large_batch_split", {8, 96, 96}, {8, 96, 96}, true},
      {"large_folded_row_split", {4, 64, 128}, {128, 200}, true},
      // The per-ISA GEMM (executor/kernels/gemm.cpp): skinny rows 1..3 with ragged columns
      // (7 rows: direct on AVX-512 and AVX2, each its own tiles), two kc blocks (k = 300 runs
      // as 2 x 150; 33 rows: direct on both, named when AVX2 packed from 4 rows), an
      // attention-shaped batch, and skinny and few-row products split by columns over tasks.
      {"skinny_m1", {1, 300}, {300, 77}},
      {"skinny_m3_ragged", {3, 41}, {41, 203}},
      {"m7_ragged", {7, 41}, {41, 203}},
      {"packed_m33_two_k_blocks", {33, 300}, {300, 23}},
      {"attention_batch", {2, 3, 16, 8}, {2, 3, 8, 16}},
      {"large_skinny_column_split", {3, 512}, {512, 1000}, true},
      {"large_few_rows_column_split", {8, 512}, {512, 1000}, true},
      // AVX-512's direct path split by rows (100 rows in whole 6-row tiles) and by columns.
      {"large_direct_row_split", {100, 256}, {256, 200}, true},
      {"large_direct_column_split", {20, 300}, {300, 700}, true},
      // Many rows split by columns where whole 64-column blocks share N more evenly than whole
      // row tiles share M (1000 rows: 504 + 496 in 12- or 6-row tiles, 256 columns: 128 + 128),
      // and a packed product that stays split by rows (200 columns: 128 + 72).
      {"large_packed_column_split", {1000, 40}, {40, 256}, true},
      {"large_packed_row_split", {600, 64}, {64, 200}, true},
  };
  std::vector<OpCase> cases;
  for (DType t : kAllDTypes) {
    for (const Fixed& f : fixed) {
      // Integer GEMMs run the same code path; the large shapes are covered once, in f32.
      if (f.large && t != DType::kF32) continue;
      cases.push_back({f.name, OpKind::kMatMul, t, {f.a, f.b}, {}, DType::kI64, 0, f.large});
    }
  }
  Rng rng(7);
  for (int i = 0; i < 10; ++i) {
    const Shape batch = randomShape(rng, 0, 2);
    const int64_t m = rng.uniform(1, 20), k = rng.uniform(1, 20), n = rng.uniform(1, 20);
    Shape a = broadcastOperand(rng, batch), b = broadcastOperand(rng, batch);
    a.push(m);
    a.push(k);
    b.push(k);
    b.push(n);
    cases.push_back({fmt::format("random{}", i), OpKind::kMatMul, DType::kF32, {a, b}, {}});
  }
  return cases;
}

std::vector<OpCase> indexSelectCases() {
  struct Fixed {
    const char* name;
    Shape in;
    int64_t dim, count;
    bool large = false;
  };
  const Fixed fixed[] = {
      {"rows", {5, 3}, 0, 7},
      {"columns_neg_dim", {4, 6}, -1, 9},
      {"middle", {2, 5, 3}, 1, 4},
      {"count0", {3, 4}, 0, 0},
      {"size1", {1}, 0, 3},
      {"rank4_neg_dim", {2, 3, 4, 5}, -3, 6},
      {"zero_outer", {0, 4}, 1, 3},
      // 8.4 MB output with 4100-byte rows: streaming stores with unaligned row heads.
      {"large_rows_streaming", {2048, 1025}, 0, 2048, true},
      {"large_inner1", {3, 300000}, 1, 300000, true},
  };
  std::vector<OpCase> cases;
  for (DType t : kAllDTypes) {
    for (DType it : kIndexTypes) {
      for (const Fixed& f : fixed) {
        if (f.large && (t != DType::kF32 || it != DType::kI64)) continue;
        cases.push_back({f.name, OpKind::kIndexSelect, t, {f.in}, f.dim, it, f.count, f.large});
        // wrap=1 (ONNX's Gather): indices in [-size, size), makeInputs draws negative ones too.
        if (f.large) continue;
        OpCase w{
            std::string(f.name) + "_wrap", OpKind::kIndexSelect, t, {f.in}, f.dim, it, f.count};
        w.typed.setInt(attr::IndexSelect::wrap, 1);
        cases.push_back(std::move(w));
      }
      Rng rng(200 + 10 * static_cast<int>(t) + static_cast<int>(it));
      for (int i = 0; i < 4; ++i) {
        Shape in = randomShape(rng, 1, 4);
        const int d = static_cast<int>(rng.uniform(0, in.rank() - 1));
        if (in[d] == 0) in[d] = 3;  // a non-empty dim, so indices exist
        const int64_t dim = rng.chance(2) ? d - in.rank() : d;
        cases.push_back({fmt::format("random{}", i),
                         OpKind::kIndexSelect,
                         t,
                         {in},
                         dim,
                         it,
                         rng.uniform(0, 9)});
      }
    }
  }
  return cases;
}

std::vector<OpCase> catCases() {
  struct Fixed {
    const char* name;
    std::vector<Shape> ins;
    int64_t dim;
    bool large = false;
  };
  std::vector<Shape> many;
  for (int i = 0; i < 20; ++i) many.push_back({2, 1 + i % 3});
  const Fixed fixed[] = {
      {"two_dim1", {{2, 3}, {2, 5}}, 1},
      {"three_dim0", {{1, 4}, {3, 4}, {2, 4}}, 0},
      {"neg_dim", {{2, 3, 4}, {2, 3, 1}}, -1},
      {"empty_input", {{2, 0}, {2, 3}}, -1},
      {"all_empty", {{0, 3}, {0, 3}}, 0},
      {"single_input", {{3, 3}}, 1},
      {"rank1", {{5}, {1}, {7}}, 0},
      {"twenty_inputs", many, 1},
      // 8 MiB output, segments of 4100 and 4092 bytes: streaming stores, unaligned heads.
      {"large_rows_streaming", {{1024, 1025}, {1024, 1023}}, 1, true},
      {"large_dim0", {{512, 1024}, {512, 1024}}, 0, true},
  };
  std::vector<OpCase> cases;
  for (DType t : kAllDTypes) {
    for (const Fixed& f : fixed) {
      if (f.large && t != DType::kF32) continue;
      cases.push_back({f.name, OpKind::kCat, t, f.ins, f.dim, DType::kI64, 0, f.large});
    }
    Rng rng(300 + static_cast<int>(t));
    for (int i = 0; i < 6; ++i) {
      const Shape base = randomShape(rng, 1, 4);
      const int d = static_cast<int>(rng.uniform(0, base.rank() - 1));
      std::vector<Shape> ins;
      for (int64_t j = rng.uniform(1, 4); j > 0; --j) {
        Shape s = base;
        s[d] = rng.uniform(0, 4);
        ins.push_back(s);
      }
      cases.push_back(
          {fmt::format("random{}", i), OpKind::kCat, t, ins, rng.chance(2) ? d - base.rank() : d});
    }
  }
  return cases;
}

std::vector<OpCase> catGatherCases() {
  struct Fixed {
    const char* name;
    std::vector<Shape> ins;
    int64_t dim, count;
    bool large = false;
  };
  const Fixed fixed[] = {
      {"two_dim1", {{2, 3}, {2, 5}}, 1, 6},
      {"three_dim0", {{3, 4}, {1, 4}, {2, 4}}, 0, 8},
      {"neg_dim", {{2, 3, 4}, {2, 2, 4}}, -2, 5},
      {"empty_input", {{2, 0, 3}, {2, 2, 3}}, 1, 3},
      {"inner1", {{3, 5}, {3, 2}}, -1, 11},
      {"large_streaming", {{512, 1024}, {512, 1024}}, 0, 2048, true},
  };
  std::vector<OpCase> cases;
  for (DType t : {DType::kF32, DType::kI64}) {
    for (DType it : kIndexTypes) {
      for (const Fixed& f : fixed) {
        if (f.large && (t != DType::kF32 || it != DType::kI32)) continue;
        cases.push_back({f.name, OpKind::kCatGather, t, f.ins, f.dim, it, f.count, f.large});
      }
    }
  }
  return cases;
}

// Mul runs Add's broadcast paths with another operator: the same shape table, every dtype.
std::vector<OpCase> mulCases() {
  std::vector<OpCase> cases = addCases();
  for (OpCase& c : cases) c.kind = OpKind::kMul;
  return cases;
}

std::vector<OpCase> reluCases() {
  const Shape fixed[] = {{}, {1}, {7}, {3, 5}, {2, 1, 3}, {0, 4}, {2, 3, 1, 2, 3, 1}};
  std::vector<OpCase> cases;
  for (DType t : kAllDTypes) {
    int i = 0;
    for (const Shape& s : fixed)
      cases.push_back({fmt::format("fixed{}", i++), OpKind::kRelu, t, {s}, {}});
    Rng rng(400 + static_cast<int>(t));
    for (int j = 0; j < 6; ++j)
      cases.push_back({fmt::format("random{}", j), OpKind::kRelu, t, {randomShape(rng, 0, 4)}, {}});
  }
  // 8.4 MB: split into tasks, streaming stores.
  cases.push_back(
      {"large_streaming", OpKind::kRelu, DType::kF32, {{2100001}}, {}, DType::kI64, 0, true});
  return cases;
}

std::vector<OpCase> transposeCases() {
  struct Fixed {
    const char* name;
    Shape in, perm;
    bool large = false;
  };
  const Fixed fixed[] = {
      {"rank1", {5}, {0}},
      {"identity", {2, 3}, {0, 1}},
      {"swap_2d", {3, 5}, {1, 0}},
      {"last_two", {2, 3, 4}, {0, 2, 1}},
      {"rotate", {2, 3, 4}, {1, 2, 0}},
      {"ones_only_move", {1, 4, 1}, {2, 1, 0}},    // only size-1 dims move: a plain copy
      {"merge_runs", {2, 3, 4, 5}, {0, 2, 3, 1}},  // NCHW -> NHWC: [2, 3, 20] -> [2, 20, 3]
      {"zero", {0, 3}, {1, 0}},
      {"rank6", {2, 1, 3, 2, 1, 3}, {5, 3, 1, 0, 2, 4}},
      {"large_swap", {1024, 1031}, {1, 0}, true},
      // Units of 240 rows when streamed (checkOnEveryIsa: 64 KiB / 268-byte rows, rounded
      // down to 8), so 240 + 240 + 37 per outer index; 67 x 517 elements per outer index, so the
      // later outputs start off 32 bytes.
      {"ragged_units", {3, 67, 517}, {0, 2, 1}},
  };
  std::vector<OpCase> cases;
  for (DType t : kAllDTypes) {
    for (const Fixed& f : fixed) {
      if (f.large && t != DType::kF32) continue;
      OpCase c{f.name, OpKind::kTranspose, t, {f.in}, {}, DType::kI64, 0, f.large};
      c.perm = f.perm;
      cases.push_back(c);
    }
    Rng rng(500 + static_cast<int>(t));
    for (int j = 0; j < 6; ++j) {
      const Shape in = randomShape(rng, 1, 5);
      // A random permutation (Fisher-Yates).
      int64_t p[kMaxRank];
      for (int i = 0; i < in.rank(); ++i) p[i] = i;
      for (int i = in.rank() - 1; i > 0; --i) std::swap(p[i], p[rng.uniform(0, i)]);
      OpCase c{fmt::format("random{}", j), OpKind::kTranspose, t, {in}, {}};
      c.perm = Shape(p, p + in.rank());
      cases.push_back(c);
    }
  }
  return cases;
}

std::vector<OpCase> reshapeCases() {
  const int64_t b = symbolDim("B");
  struct Fixed {
    const char* name;
    Shape in, target;
    bool large = false;
  };
  const Fixed fixed[] = {
      {"flatten", {2, 3, 4}, {-1}},
      {"split_dim", {6, 5}, {2, 3, 5}},
      {"infer_middle", {4, 16, 7}, {4, -1, 7}},
      {"named_keeps_dim", {3, 16, 5}, {b, 8, -1}},
      {"to_scalar", {1, 1}, {}},
      {"from_scalar", {}, {1, 1, 1}},
      {"size1_dims", {1}, {1, -1, 1}},
      {"zero_numel", {0, 6}, {3, 0, 2}},
      {"large_copy", {2048, 1025}, {1025, -1}, true},
  };
  std::vector<OpCase> cases;
  for (DType t : kAllDTypes) {
    for (const Fixed& f : fixed) {
      if (f.large && t != DType::kF32) continue;
      OpCase c{f.name, OpKind::kReshape, t, {f.in}, {}, DType::kI64, 0, f.large};
      c.shape = f.target;
      cases.push_back(c);
    }
  }
  return cases;
}

// torch.matmul's 1-D operands: [K] x [..., K, N], [..., M, K] x [K], [K] x [K].
std::vector<OpCase> matmulVectorCases() {
  struct Fixed {
    const char* name;
    Shape a, b;
  };
  const Fixed fixed[] = {
      {"vec_mat", {5}, {5, 3}},        {"mat_vec", {4, 5}, {5}},        {"vdot", {7}, {7}},
      {"vec_batched", {3}, {2, 3, 4}}, {"batched_vec", {2, 4, 3}, {3}}, {"dot_k1", {1}, {1}},
      {"vec_k0", {0}, {0, 3}},
  };
  std::vector<OpCase> cases;
  for (DType t : kAllDTypes)
    for (const Fixed& f : fixed) cases.push_back({f.name, OpKind::kMatMul, t, {f.a, f.b}, {}});
  return cases;
}

// ---- clip, sigmoid, flatten, squeeze, unsqueeze, slice, pad, batch_norm ----------------------

constexpr double kInfD = std::numeric_limits<double>::infinity();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

std::vector<OpCase> clipCases() {
  // Bounds: the defaults, one-sided, both, fractional (integers round inward), min > max.
  const std::pair<double, double> bounds[] = {{-kInfD, kInfD}, {-0.5, 0.25}, {0, kInfD},
                                              {-kInfD, 20.5},  {10.5, 50.2}, {0.5, -0.5}};
  const Shape fixed[] = {{}, {1}, {7}, {3, 5}, {2, 1, 3}, {0, 4}, {2, 3, 1, 2, 3, 1}};
  std::vector<OpCase> cases;
  auto add = [&](std::string name, DType t, Shape s, std::pair<double, double> b, bool large) {
    OpCase c{std::move(name), OpKind::kClip, t, {std::move(s)}, {}};
    c.typed.setFloat(attr::Clip::min, b.first);
    c.typed.setFloat(attr::Clip::max, b.second);
    c.large = large;
    cases.push_back(std::move(c));
  };
  for (DType t : kAllDTypes) {
    int i = 0;
    for (const Shape& s : fixed) add(fmt::format("fixed{}", i), t, s, bounds[i % 6], false), ++i;
    for (size_t k = 0; k < std::size(bounds); ++k)
      add(fmt::format("bounds{}", k), t, {4, 9}, bounds[k], false);
    Rng rng(1100 + static_cast<int>(t));
    for (int j = 0; j < 6; ++j)
      add(fmt::format("random{}", j), t, randomShape(rng, 0, 4), bounds[rng.uniform(0, 5)], false);
  }
  add("large_streaming", DType::kF32, {2100001}, bounds[1], true);
  return cases;
}

std::vector<OpCase> sigmoidCases() {
  const Shape fixed[] = {{}, {1}, {7}, {3, 5}, {2, 1, 3}, {0, 4}, {2, 3, 1, 2, 3, 1}};
  std::vector<OpCase> cases;
  int i = 0;
  for (const Shape& s : fixed)
    cases.push_back({fmt::format("fixed{}", i++), OpKind::kSigmoid, DType::kF32, {s}, {}});
  Rng rng(1200);
  for (int j = 0; j < 6; ++j)
    cases.push_back(
        {fmt::format("random{}", j), OpKind::kSigmoid, DType::kF32, {randomShape(rng, 0, 4)}, {}});
  cases.push_back(
      {"large_streaming", OpKind::kSigmoid, DType::kF32, {{2100001}}, {}, DType::kI64, 0, true});
  return cases;
}

// One unary case with an Int or Ints attribute, every dtype (large: f32 only).
struct AxesFixed {
  const char* name;
  Shape in;
  std::vector<int64_t> axes;
  bool large = false;
};

std::vector<OpCase> axesCases(OpKind kind, int slot, bool single,
                              std::span<const AxesFixed> fixed) {
  std::vector<OpCase> cases;
  for (DType t : kAllDTypes) {
    for (const AxesFixed& f : fixed) {
      if (f.large && t != DType::kF32) continue;
      OpCase c{f.name, kind, t, {f.in}, {}, DType::kI64, 0, f.large};
      if (single) {
        c.typed.setInt(slot, f.axes[0]);
      } else {
        c.typed.setInts(slot, f.axes);
      }
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

std::vector<OpCase> flattenCases() {
  const AxesFixed fixed[] = {
      {"axis0", {2, 3, 4}, {0}},
      {"axis1", {2, 3, 4}, {1}},
      {"axis2", {2, 3, 4}, {2}},
      {"axis_rank", {2, 3, 4}, {3}},
      {"axis_neg1", {2, 3, 4}, {-1}},
      {"axis_neg3", {2, 3, 4}, {-3}},
      {"scalar", {}, {0}},
      {"zero", {0, 3}, {1}},
      {"ones", {1, 1, 1}, {2}},
      {"large_copy", {2048, 1025}, {1}, true},
  };
  return axesCases(OpKind::kFlatten, attr::Flatten::axis, true, fixed);
}

std::vector<OpCase> squeezeCases() {
  const AxesFixed fixed[] = {
      {"two", {1, 3, 1, 5}, {0, 2}},
      {"neg", {4, 1}, {-1}},
      {"to_scalar", {1}, {0}},
      {"zero", {1, 0, 1}, {2, 0}},
      {"none", {2, 3}, {}},
      {"all_ones", {1, 1, 1}, {0, 1, 2}},
      {"large_copy", {2048, 1, 1025}, {1}, true},
  };
  return axesCases(OpKind::kSqueeze, attr::Squeeze::axes, false, fixed);
}

std::vector<OpCase> unsqueezeCases() {
  const AxesFixed fixed[] = {
      {"front", {3, 5}, {0}},
      {"back_neg", {3, 5}, {-1}},
      {"two", {3, 5}, {0, 3}},
      {"from_scalar", {}, {0}},
      {"zero", {2, 0}, {1}},
      {"unsorted", {2, 3}, {4, -5, 2}},
      {"large_copy", {2048, 1025}, {1}, true},
  };
  return axesCases(OpKind::kUnsqueeze, attr::Unsqueeze::axes, false, fixed);
}

OpCase sliceCase(std::string name, DType t, Shape in, std::vector<int64_t> starts,
                 std::vector<int64_t> ends, std::vector<int64_t> axes = {},
                 std::vector<int64_t> steps = {}, bool large = false) {
  namespace a = attr::Slice;
  OpCase c{std::move(name), OpKind::kSlice, t, {std::move(in)}, {}, DType::kI64, 0, large};
  c.typed.setInts(a::starts, starts);
  c.typed.setInts(a::ends, ends);
  if (!axes.empty()) c.typed.setInts(a::axes, axes);
  if (!steps.empty()) c.typed.setInts(a::steps, steps);
  return c;
}

std::vector<OpCase> sliceCases() {
  std::vector<OpCase> cases;
  for (DType t : kAllDTypes) {
    cases.push_back(sliceCase("simple", t, {10}, {2}, {8}));
    cases.push_back(sliceCase("step3", t, {10}, {1}, {10}, {0}, {3}));
    cases.push_back(sliceCase("neg_start_to_end", t, {10}, {-3}, {kI64Max}));
    cases.push_back(sliceCase("reverse", t, {7}, {-1}, {kI64Min}, {0}, {-1}));
    cases.push_back(sliceCase("neg_step2", t, {10}, {8}, {1}, {0}, {-2}));
    cases.push_back(sliceCase("clamped", t, {5}, {-100}, {100}));
    cases.push_back(sliceCase("clamped_neg_step", t, {5}, {100}, {-100}, {0}, {-3}));
    cases.push_back(sliceCase("empty_range", t, {6}, {5}, {2}));
    cases.push_back(sliceCase("huge_step", t, {6}, {1}, {kI64Max}, {0}, {kI64Max}));
    cases.push_back(sliceCase("axes_unsorted", t, {4, 5, 6}, {1, 1}, {5, 3}, {2, 0}));
    cases.push_back(sliceCase("last_axis_neg", t, {4, 5, 6}, {2}, {-1}, {-1}));
    cases.push_back(sliceCase("leading_contiguous", t, {3, 4, 5}, {1}, {3}, {0}));
    cases.push_back(
        sliceCase("inner_strided_rev", t, {3, 4, 5}, {4, 3}, {0, kI64Min}, {2, 1}, {-2, -1}));
    cases.push_back(sliceCase("to_one", t, {3, 4}, {1, 2}, {2, 3}));
    cases.push_back(sliceCase("zero_input", t, {0, 3}, {0}, {2}, {1}));
    cases.push_back(sliceCase("scalar_no_axes", t, {}, {}, {}));
    cases.push_back(
        sliceCase("rank6", t, {2, 3, 2, 3, 2, 3}, {1, -2, 0}, {2, 0, 3}, {1, 3, 5}, {1, -1, 2}));
    Rng rng(1300 + static_cast<int>(t));
    for (int j = 0; j < 8; ++j) {
      const Shape in = randomShape(rng, 1, 4);
      std::vector<int64_t> starts, ends, axes, steps;
      for (int d = 0; d < in.rank(); ++d) {
        if (rng.chance(3)) continue;
        const int64_t n = in[d];
        axes.push_back(rng.chance(2) ? d : d - in.rank());
        starts.push_back(rng.uniform(-n - 2, n + 2));
        ends.push_back(rng.chance(6) ? kI64Max : rng.uniform(-n - 2, n + 2));
        int64_t step = rng.uniform(-3, 3);
        steps.push_back(step == 0 ? 1 : step);
      }
      if (axes.empty()) {
        axes.push_back(0);
        starts.push_back(0);
        ends.push_back(kI64Max);
        steps.push_back(-1);
      }
      OpCase c = sliceCase(fmt::format("random{}", j), t, in, starts, ends, axes, steps);
      cases.push_back(std::move(c));
    }
  }
  cases.push_back(sliceCase("large_cols", DType::kF32, {2048, 1030}, {1}, {1029}, {1}, {}, true));
  return cases;
}

OpCase padCase(std::string name, DType t, Shape in, std::vector<int64_t> pads, double value = 0,
               bool large = false) {
  OpCase c{std::move(name), OpKind::kPad, t, {std::move(in)}, {}, DType::kI64, 0, large};
  c.typed.setInts(attr::Pad::pads, pads);
  c.typed.setFloat(attr::Pad::value, value);
  return c;
}

std::vector<OpCase> padCases() {
  std::vector<OpCase> cases;
  for (DType t : kAllDTypes) {
    cases.push_back(padCase("both_dims", t, {3, 4}, {1, 2, 0, 1}));
    cases.push_back(padCase("value", t, {3, 4}, {0, 1, 2, 0}, 7.5));
    cases.push_back(padCase("crop", t, {4, 5}, {-1, 0, 0, -2}));
    cases.push_back(padCase("crop_and_pad", t, {4, 5}, {-1, 2, 1, -2}, -3));
    cases.push_back(padCase("no_pads", t, {2, 3, 4}, {0, 0, 0, 0, 0, 0}));
    cases.push_back(padCase("last_dim_only", t, {2, 3, 4}, {0, 0, 1, 0, 0, 2}, 1));
    cases.push_back(padCase("middle_dim", t, {2, 3, 4}, {0, 2, 0, 0, 1, 0}));
    cases.push_back(padCase("scalar", t, {}, {}));
    cases.push_back(padCase("empty_input", t, {0, 3}, {1, 0, 1, 0}, 2));
    cases.push_back(padCase("crop_to_empty", t, {3, 2}, {-3, 0, 0, 0}));
    cases.push_back(padCase("crop_cols_away", t, {3, 2}, {0, -2, 0, 0}, 4));
    cases.push_back(padCase("crop_rows_pad_col", t, {3, 2}, {-1, 0, -1, 1}, 4));
    cases.push_back(padCase("one", t, {1}, {1, 1}));
    Rng rng(1400 + static_cast<int>(t));
    for (int j = 0; j < 8; ++j) {
      const Shape in = randomShape(rng, 1, 4);
      std::vector<int64_t> pads(2 * static_cast<size_t>(in.rank()));
      for (int d = 0; d < in.rank(); ++d) {
        // Crops never below an empty dim: begin + end >= -size.
        pads[d] = rng.uniform(-in[d] / 2, 2);
        pads[in.rank() + d] = rng.uniform(-(in[d] - in[d] / 2), 2);
      }
      cases.push_back(padCase(fmt::format("random{}", j), t, in, pads, rng.chance(2) ? 0 : -1));
    }
  }
  cases.push_back(padCase("large", DType::kF32, {1024, 1030}, {1, 1, 1, 1}, 0, true));
  return cases;
}

std::vector<OpCase> batchNormCases() {
  struct Fixed {
    const char* name;
    Shape x;
    double eps = 1e-5;
    bool large = false;
  };
  const Fixed fixed[] = {
      {"rank2", {2, 3}},
      {"nchw", {1, 3, 4, 5}},
      {"one_channel", {2, 1, 3}},
      {"empty_batch", {0, 3, 2}},
      {"eps", {2, 4, 3, 3}, 1e-3},
      {"rank5", {1, 2, 2, 3, 1}},
      {"ones", {1, 1}},
      {"large", {8, 64, 64, 64}, 1e-5, true},
  };
  std::vector<OpCase> cases;
  for (const Fixed& f : fixed) {
    const Shape c{f.x[1]};
    OpCase k{f.name, OpKind::kBatchNorm, DType::kF32, {f.x, c, c, c, c},
             {},     DType::kI64,        0,           f.large};
    k.typed.setFloat(attr::BatchNorm::epsilon, f.eps);
    cases.push_back(std::move(k));
  }
  Rng rng(1500);
  for (int j = 0; j < 6; ++j) {
    Shape x = randomShape(rng, 2, 4);
    const Shape c{x[1]};
    OpCase k{fmt::format("random{}", j), OpKind::kBatchNorm, DType::kF32, {x, c, c, c, c}, {}};
    k.typed.setFloat(attr::BatchNorm::epsilon, 1e-5);
    cases.push_back(std::move(k));
  }
  return cases;
}

// Conv2d: fixed geometries (1x1, odd sizes, stride, dilation, asymmetric pads, groups,
// depthwise with a channel multiplier, an empty batch) and random ones, f32 only.
OpCase convCase(std::string name, Shape x, Shape w, bool bias, std::initializer_list<int64_t> s,
                std::initializer_list<int64_t> pads, std::initializer_list<int64_t> d,
                int64_t group, bool large = false) {
  namespace a = attr::Conv2d;
  OpCase c{std::move(name), OpKind::kConv2d, DType::kF32, {x, w}, {}};
  if (bias) c.shapes.push_back(Shape{w[0]});
  c.typed.setInts(a::strides, s);
  c.typed.setInts(a::pads, pads);
  c.typed.setInts(a::dilations, d);
  c.typed.setInt(a::group, group);
  c.large = large;
  return c;
}

std::vector<OpCase> convCases() {
  std::vector<OpCase> cases = {
      convCase("ones", {1, 1, 1, 1}, {1, 1, 1, 1}, false, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1),
      convCase("pointwise", {2, 5, 3, 7}, {4, 5, 1, 1}, true, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1),
      convCase("odd_3x3_s2_p1", {1, 3, 7, 5}, {4, 3, 3, 3}, true, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1),
      convCase("dilated", {2, 2, 9, 8}, {3, 2, 3, 2}, false, {1, 2}, {2, 1, 2, 1}, {2, 3}, 1),
      convCase("asym_pads", {1, 2, 6, 6}, {2, 2, 3, 3}, true, {1, 1}, {0, 1, 2, 0}, {1, 1}, 1),
      convCase("groups2", {2, 4, 5, 6}, {6, 2, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2),
      convCase("depthwise", {2, 5, 7, 9}, {5, 1, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 5),
      convCase("depthwise_s2_x2", {1, 3, 8, 7}, {6, 1, 5, 3}, false, {2, 2}, {2, 1, 1, 2}, {1, 1},
               3),
      convCase("pointwise_strided", {1, 4, 7, 7}, {3, 4, 1, 1}, false, {2, 2}, {0, 0, 0, 0}, {1, 1},
               1),
      convCase("empty_batch", {0, 3, 5, 5}, {2, 3, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1),
      // 2 * 32 * 64 * 64 * 144 = 38 MFLOP: split into tasks.
      convCase("large", {1, 16, 64, 64}, {32, 16, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1,
               true),
      convCase("large_depthwise", {4, 64, 56, 56}, {64, 1, 3, 3}, true, {1, 1}, {1, 1, 1, 1},
               {1, 1}, 64, true),
      // Channels enough for whole micro-kernel tiles and a partial one, K in two gathered
      // slices (450 deep), several blocks of positions.
      convCase("wide_3x3", {1, 50, 11, 13}, {29, 50, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1),
      convCase("wide_pointwise", {2, 40, 9, 11}, {30, 40, 1, 1}, true, {1, 1}, {0, 0, 0, 0}, {1, 1},
               1),
      convCase("many_positions", {1, 8, 40, 45}, {13, 8, 3, 3}, false, {1, 1}, {1, 1, 1, 1}, {1, 1},
               1),
      // The fused activations (fuse-conv-activation): relu on the GEMM path, a clip on depthwise.
      [] {
        OpCase c = convCase("wide_3x3_relu", {1, 50, 11, 13}, {29, 50, 3, 3}, true, {1, 1},
                            {1, 1, 1, 1}, {1, 1}, 1);
        c.typed.setFloat(attr::Conv2d::act_min, 0.0);
        return c;
      }(),
      [] {
        OpCase c = convCase("depthwise_clip", {2, 5, 7, 9}, {5, 1, 3, 3}, true, {1, 1},
                            {1, 1, 1, 1}, {1, 1}, 5);
        c.typed.setFloat(attr::Conv2d::act_min, -0.5);
        c.typed.setFloat(attr::Conv2d::act_max, 0.25);
        return c;
      }(),
      // Few positions and 11 MFLOP: split into tasks by output channels (ConvParams::mSplit).
      convCase("deep_channel_split", {1, 128, 7, 7}, {96, 128, 3, 3}, true, {1, 1}, {1, 1, 1, 1},
               {1, 1}, 1, true),
      // The same through the shared B of a two-phase run: two images x two groups (four items,
      // two channel blocks each), and K in two slices over 196 positions with partial panels.
      [] {
        OpCase c = convCase("two_phase_groups", {2, 64, 10, 10}, {96, 32, 3, 3}, true, {1, 1},
                            {1, 1, 1, 1}, {1, 1}, 2, true);
        c.typed.setFloat(attr::Conv2d::act_min, 0.0);
        return c;
      }(),
      // (200 channels over 196 positions: on AVX2 fewer channels than positions split the
      // positions instead.)
      convCase("two_phase_slices", {1, 64, 14, 14}, {200, 64, 3, 3}, true, {1, 1}, {1, 1, 1, 1},
               {1, 1}, 1, true),
      // Fewer channels than positions at batch 1: on AVX2 two tasks take half the positions
      // each (105 and 105; 98 and 97), each packing its own B.
      convCase("position_split_1x1_s2", {1, 192, 29, 27}, {150, 192, 1, 1}, true, {2, 2},
               {0, 0, 0, 0}, {1, 1}, 1, true),
      convCase("position_split_3x3", {1, 64, 15, 13}, {40, 64, 3, 3}, false, {1, 1}, {1, 1, 1, 1},
               {1, 1}, 1, true),
  };
  Rng rng(900);
  for (int j = 0; j < 12; ++j) {
    const int64_t group = rng.chance(3) ? rng.uniform(2, 3) : 1;
    const int64_t cg = rng.uniform(1, 3), mg = rng.uniform(1, 3);
    const int64_t kh = rng.uniform(1, 3), kw = rng.uniform(1, 3);
    const int64_t dh = rng.uniform(1, 2), dw = rng.uniform(1, 2);
    const int64_t sh = rng.uniform(1, 3), sw = rng.uniform(1, 3);
    const int64_t pt = rng.uniform(0, 2), pl = rng.uniform(0, 2), pb = rng.uniform(0, 2),
                  pr = rng.uniform(0, 2);
    // Large enough that the padded input holds one dilated window.
    const int64_t h = std::max<int64_t>(rng.uniform(1, 9), dh * (kh - 1) + 1 - pt - pb);
    const int64_t w = std::max<int64_t>(rng.uniform(1, 9), dw * (kw - 1) + 1 - pl - pr);
    cases.push_back(convCase(fmt::format("random{}", j), {rng.uniform(1, 3), cg * group, h, w},
                             {mg * group, cg, kh, kw}, rng.chance(2), {sh, sw}, {pt, pl, pb, pr},
                             {dh, dw}, group));
  }
  return cases;
}

// Pools: kernel, strides, pads, ceil_mode, count_include_pad (avg) or dilations (max).
std::vector<OpCase> poolCases(OpKind kind) {
  const bool isMax = kind == OpKind::kMaxPool2d;
  auto make = [&](std::string name, Shape x, std::initializer_list<int64_t> k,
                  std::initializer_list<int64_t> s, std::initializer_list<int64_t> p, int64_t ceil,
                  int64_t extra, bool large = false) {
    OpCase c{std::move(name), kind, DType::kF32, {x}, {}};
    c.typed.setInts(0, k);
    c.typed.setInts(1, s);
    c.typed.setInts(2, p);
    if (isMax) {
      c.typed.setInts(attr::MaxPool2d::dilations, {extra, extra});
      c.typed.setInt(attr::MaxPool2d::ceil_mode, ceil);
    } else {
      c.typed.setInt(attr::AvgPool2d::ceil_mode, ceil);
      c.typed.setInt(attr::AvgPool2d::count_include_pad, extra);
    }
    c.large = large;
    return c;
  };
  std::vector<OpCase> cases = {
      make("ones", {1, 1, 1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 0, 1),
      make("k3s2p1", {2, 3, 7, 8}, {3, 3}, {2, 2}, {1, 1, 1, 1}, 0, 1),
      make("k3s2p1_ceil", {2, 3, 7, 8}, {3, 3}, {2, 2}, {1, 1, 1, 1}, 1, isMax ? 2 : 0),
      make("k2s2_ceil_odd", {1, 2, 5, 7}, {2, 2}, {2, 2}, {0, 0, 0, 0}, 1, isMax ? 1 : 1),
      make("asym", {1, 2, 6, 5}, {3, 2}, {1, 2}, {1, 0, 0, 1}, 0, isMax ? 2 : 1),
      // Three wide at column stride 2 (max: the row-buffer walk on AVX-512): unpadded with
      // ceil_mode (the last window past the input), and two rows a window over 37 columns.
      make("k3s2p0_ceil", {1, 3, 10, 12}, {3, 3}, {2, 2}, {0, 0, 0, 0}, 1, 1),
      make("k2x3s1x2_wide", {2, 2, 5, 37}, {2, 3}, {1, 2}, {0, 1, 1, 1}, 0, 1),
      make("empty_batch", {0, 2, 4, 4}, {2, 2}, {2, 2}, {0, 0, 0, 0}, 0, 1),
      make("large", {8, 64, 112, 112}, {3, 3}, {2, 2}, {1, 1, 1, 1}, 0, 1, true),
  };
  return cases;
}

std::vector<OpCase> maxPoolCases() {
  return poolCases(OpKind::kMaxPool2d);
}
std::vector<OpCase> avgPoolCases() {
  return poolCases(OpKind::kAvgPool2d);
}

std::vector<OpCase> meanCases() {
  auto make = [](std::string name, Shape x, std::initializer_list<int64_t> axes, int64_t keep,
                 bool large = false) {
    OpCase c{std::move(name), OpKind::kMean, DType::kF32, {x}, {}};
    c.typed.setInts(attr::Mean::axes, axes);
    c.typed.setInt(attr::Mean::keepdims, keep);
    c.large = large;
    return c;
  };
  return {
      make("global_pool", {2, 5, 7, 3}, {2, 3}, 1),
      make("last", {3, 9}, {-1}, 0),
      make("middle", {2, 7, 5}, {1}, 1),
      make("first", {7, 3}, {0}, 0),
      make("all", {3, 1, 5}, {0, 1, 2}, 0),
      make("non_adjacent", {2, 3, 4, 5}, {1, 3}, 1),
      make("non_adjacent_drop", {3, 2, 5}, {0, 2}, 0),
      make("ones", {1}, {0}, 1),
      make("large", {128, 512, 7, 7}, {2, 3}, 1, true),
  };
}

// ---- transformer ops (issue 24) -------------------------------------------------------------

// Sub: every Add shape and dtype. Div and Pow (f32 only): Add's f32 shapes.
std::vector<OpCase> subCases() {
  std::vector<OpCase> cases = addCases();
  for (OpCase& c : cases) c.kind = OpKind::kSub;
  return cases;
}
std::vector<OpCase> floatBinaryCases(OpKind kind) {
  std::vector<OpCase> cases = addCases();
  std::erase_if(cases, [](const OpCase& c) { return c.dtype != DType::kF32; });
  for (OpCase& c : cases) c.kind = kind;
  return cases;
}
std::vector<OpCase> divCases() {
  return floatBinaryCases(OpKind::kDiv);
}
std::vector<OpCase> powCases() {
  std::vector<OpCase> cases = floatBinaryCases(OpKind::kPow);
  // powf is slow (no vector form): the task split is checked on a smaller shape.
  std::erase_if(cases, [](const OpCase& c) { return c.large; });
  cases.push_back(
      {"large_same", OpKind::kPow, DType::kF32, {{300001}, {300001}}, {}, DType::kI64, 0, true});
  return cases;
}

// One-input f32 ops: fixed shapes (scalar, 1, odd, empty, rank 6), random ones, one large.
std::vector<OpCase> floatUnaryCases(OpKind kind, uint64_t seed, Attrs typed = {}) {
  const Shape fixed[] = {{}, {1}, {7}, {3, 5}, {2, 1, 3}, {0, 4}, {2, 3, 1, 2, 3, 1}};
  std::vector<OpCase> cases;
  int i = 0;
  for (const Shape& s : fixed) {
    cases.push_back({fmt::format("fixed{}", i++), kind, DType::kF32, {s}, {}});
    cases.back().typed = typed;
  }
  Rng rng(seed);
  for (int j = 0; j < 6; ++j) {
    cases.push_back({fmt::format("random{}", j), kind, DType::kF32, {randomShape(rng, 0, 4)}, {}});
    cases.back().typed = typed;
  }
  cases.push_back({"large_streaming", kind, DType::kF32, {{2100001}}, {}, DType::kI64, 0, true});
  cases.back().typed = typed;
  return cases;
}
std::vector<OpCase> sqrtCases() {
  return floatUnaryCases(OpKind::kSqrt, 2400);
}
std::vector<OpCase> erfCases() {
  return floatUnaryCases(OpKind::kErf, 2401);
}
std::vector<OpCase> tanhCases() {
  return floatUnaryCases(OpKind::kTanh, 2402);
}
std::vector<OpCase> geluCases() {
  std::vector<OpCase> cases = floatUnaryCases(OpKind::kGelu, 2403);
  Attrs tanhForm;
  tanhForm.setInt(attr::Gelu::approximate, 1);
  for (OpCase& c : floatUnaryCases(OpKind::kGelu, 2404, tanhForm)) {
    c.name = "tanh_" + c.name;
    cases.push_back(std::move(c));
  }
  return cases;
}

// Softmax: every axis position (last: attention's rows; middle and first: strided lines),
// sizes 1, odd and 0, and a large attention-score shape.
std::vector<OpCase> softmaxCases() {
  auto make = [](std::string name, Shape x, int64_t axis, bool large = false) {
    OpCase c{std::move(name), OpKind::kSoftmax, DType::kF32, {x}, {}};
    c.typed.setInt(attr::Softmax::axis, axis);
    c.large = large;
    return c;
  };
  std::vector<OpCase> cases = {
      make("last", {3, 7}, -1),
      make("one", {1}, 0),
      make("row_of_one", {5, 1}, 1),
      make("middle", {2, 5, 3}, 1),
      make("first", {4, 3}, 0),
      make("attention", {2, 4, 9, 9}, 3),
      make("empty_axis", {3, 0}, 1),
      make("empty_outer", {0, 5}, -1),
      make("rank6", {2, 1, 3, 1, 2, 3}, 2),
      make("large_attention", {8, 4, 128, 128}, -1, true),  // split by its exp's flops
  };
  Rng rng(2500);
  for (int j = 0; j < 6; ++j) {
    const Shape x = randomShape(rng, 1, 4);
    cases.push_back(make(fmt::format("random{}", j), x, rng.uniform(-x.rank(), x.rank() - 1)));
  }
  return cases;
}

// LayerNorm: the normalised group from one dim to all of them, with and without scale and bias,
// epsilons, sizes 1 and 0.
std::vector<OpCase> layerNormCases() {
  auto make = [](std::string name, Shape x, int64_t axis, int affine, double eps = 1e-5,
                 bool large = false) {
    OpCase c{std::move(name), OpKind::kLayerNorm, DType::kF32, {x}, {}};
    const int r = x.rank();
    const int a = static_cast<int>(axis < 0 ? axis + r : axis);
    const Shape group(x.begin() + a, x.end());
    for (int k = 0; k < affine; ++k) c.shapes.push_back(group);
    c.typed.setInt(attr::LayerNorm::axis, axis);
    c.typed.setFloat(attr::LayerNorm::epsilon, eps);
    c.large = large;
    return c;
  };
  std::vector<OpCase> cases = {
      make("last_affine", {2, 3, 8}, -1, 2),
      make("last_scale_only", {4, 5}, -1, 1),
      make("last_plain", {3, 7}, 1, 0),
      make("two_dims", {2, 3, 4}, 1, 2),
      make("all_dims", {3, 5}, 0, 2),
      make("row_of_one", {6, 1}, -1, 2),
      make("eps", {2, 9}, -1, 2, 1e-2),
      make("empty_rows", {0, 4}, -1, 2),
      make("empty_group", {3, 0}, -1, 2),
      make("rank6", {1, 2, 1, 3, 2, 2}, 3, 2),
      make("large", {2048, 768}, -1, 2, 1e-5, true),
  };
  Rng rng(2600);
  for (int j = 0; j < 6; ++j) {
    const Shape x = randomShape(rng, 1, 4);
    cases.push_back(make(fmt::format("random{}", j), x, rng.uniform(-x.rank(), x.rank() - 1),
                         static_cast<int>(rng.uniform(0, 2))));
  }
  return cases;
}

std::vector<OpCase> reduceSumCases() {
  std::vector<OpCase> cases = meanCases();
  for (OpCase& c : cases) {
    c.kind = OpKind::kReduceSum;
    Attrs a;
    a.setInts(attr::ReduceSum::axes, c.typed.ints(attr::Mean::axes));
    a.setInt(attr::ReduceSum::keepdims, c.typed.i(attr::Mean::keepdims));
    c.typed = a;
  }
  cases.push_back(cases[0]);
  cases.back().name = "empty_reduce";
  cases.back().shapes = {{3, 0, 2}};
  cases.back().typed.setInts(attr::ReduceSum::axes, {1});
  return cases;
}

// Where: the condition in each dtype, x and y in each dtype, broadcast over all three.
std::vector<OpCase> whereCases() {
  struct Fixed {
    const char* name;
    Shape c, x, y;
    bool large = false;
  };
  const Fixed fixed[] = {
      {"same", {2, 3}, {2, 3}, {2, 3}},
      {"scalar_y", {4, 5}, {4, 5}, {}},
      {"mask_row", {1, 6}, {3, 6}, {1}},
      {"mask_column", {3, 1}, {3, 4}, {3, 4}},
      {"attention_mask", {1, 1, 5, 5}, {2, 3, 5, 5}, {}},
      {"all_broadcast", {2, 1, 1}, {1, 3, 1}, {1, 1, 4}},
      {"empty", {0, 3}, {3}, {1}},
      {"scalars", {}, {}, {}},
      {"large_mask", {1, 1, 256, 256}, {4, 8, 256, 256}, {}, true},
  };
  std::vector<OpCase> cases;
  for (DType ct : kAllDTypes)
    for (DType vt : kAllDTypes)
      for (const Fixed& f : fixed) {
        if (f.large && (ct != DType::kI32 || vt != DType::kF32)) continue;
        OpCase c{fmt::format("{}_cond{}", f.name, dtypeName(ct)),
                 OpKind::kWhere,
                 vt,
                 {f.c, f.x, f.y},
                 {},
                 DType::kI64,
                 0,
                 f.large};
        c.indexType = ct;  // the condition's dtype (makeInputs)
        cases.push_back(std::move(c));
      }
  Rng rng(2700);
  for (int j = 0; j < 8; ++j) {
    const Shape out = randomShape(rng, 0, 4);
    OpCase c{fmt::format("random{}_cond{}", j, dtypeName(kAllDTypes[j % 3])),
             OpKind::kWhere,
             DType::kF32,
             {broadcastOperand(rng, out), broadcastOperand(rng, out), broadcastOperand(rng, out)},
             {}};
    c.indexType = kAllDTypes[j % 3];
    cases.push_back(std::move(c));
  }
  return cases;
}

// Expand: broadcasting up (new leading dims, size-1 dims), a target of 1s that keeps x's dims,
// no broadcast at all (a copy), empty results.
std::vector<OpCase> expandCases() {
  struct Fixed {
    const char* name;
    Shape x, target;
    bool large = false;
  };
  const Fixed fixed[] = {
      {"scalar_to_matrix", {}, {3, 4}},
      {"row", {4}, {3, 4}},
      {"column", {3, 1}, {3, 5}},
      {"keep_with_ones", {2, 3}, {1, 1}},
      {"bidirectional", {3, 1}, {1, 4}},
      {"copy", {2, 3}, {2, 3}},
      {"mask", {1, 1, 5, 5}, {2, 4, 5, 5}},
      {"middle", {2, 1, 3}, {2, 4, 3}},
      {"empty", {0, 1}, {0, 3}},
      {"rank6", {1, 2, 1, 3, 1, 1}, {2, 2, 2, 3, 2, 1}},
      {"large", {1, 1024}, {2048, 1024}, true},
  };
  std::vector<OpCase> cases;
  for (DType t : kAllDTypes)
    for (const Fixed& f : fixed) {
      if (f.large && t != DType::kF32) continue;
      OpCase c{f.name, OpKind::kExpand, t, {f.x}, {}, DType::kI64, 0, f.large};
      c.shape = f.target;
      cases.push_back(std::move(c));
    }
  return cases;
}

// Cast: every pair of dtypes; f32 inputs include values outside int32's range, infinities and
// NaN (makeInputs), where the rule gives the integer's minimum.
std::vector<OpCase> castCases() {
  const std::pair<DType, int64_t> to[] = {{DType::kF32, 1}, {DType::kI32, 6}, {DType::kI64, 7}};
  const Shape fixed[] = {{}, {1}, {37}, {3, 5}, {0, 2}};
  std::vector<OpCase> cases;
  for (DType from : kAllDTypes)
    for (const auto& [t, code] : to) {
      int i = 0;
      for (const Shape& s : fixed) {
        OpCase c{fmt::format("to_{}_fixed{}", dtypeName(t), i++), OpKind::kCast, from, {s}, {}};
        c.typed.setInt(attr::Cast::to, code);
        cases.push_back(std::move(c));
      }
    }
  OpCase large{"large", OpKind::kCast, DType::kF32, {{2100001}}, {}, DType::kI64, 0, true};
  large.typed.setInt(attr::Cast::to, 7);
  cases.push_back(std::move(large));
  return cases;
}

// Gather: N-D indices (an embedding's [B, S] ids), 0-D and 1-D ones, every axis, negative
// indices (makeInputs draws them from [-size, size)), empty index sets.
std::vector<OpCase> gatherCases() {
  struct Fixed {
    const char* name;
    Shape data, index;
    int64_t axis;
    bool large = false;
  };
  const Fixed fixed[] = {
      {"embedding", {50, 8}, {2, 7}, 0},     {"one_id", {10, 4}, {}, 0},
      {"vector_ids", {10, 4}, {6}, 0},       {"axis1_2d", {3, 9, 2}, {2, 2}, 1},
      {"last_axis", {4, 5}, {3}, -1},        {"empty_index", {5, 3}, {0, 2}, 0},
      {"rank3_index", {7, 3}, {2, 1, 3}, 0}, {"large", {30000, 256}, {32, 128}, 0, true},
  };
  std::vector<OpCase> cases;
  for (DType t : kAllDTypes)
    for (DType ix : kIndexTypes)
      for (const Fixed& f : fixed) {
        if (f.large && (t != DType::kF32 || ix != DType::kI64)) continue;
        OpCase c{f.name, OpKind::kGather, t, {f.data, f.index}, {}, ix, 0, f.large};
        c.typed.setInt(attr::Gather::axis, f.axis);
        cases.push_back(std::move(c));
      }
  return cases;
}

// Trilu: upper and lower, k from far below to far above the diagonal (the int64 extremes
// included), square and non-square, batches, empty matrices; integer dtypes on fewer ks.
std::vector<OpCase> triluCases() {
  const Shape shapes[] = {{4, 4}, {3, 5}, {5, 2}, {2, 3, 3}, {1, 1}, {0, 3}, {2, 3, 0}};
  const int64_t ks[] = {0, 1, -1, 3, -4, kI64Max, kI64Min};
  std::vector<OpCase> cases;
  for (DType t : kAllDTypes)
    for (int64_t upper : {0, 1})
      for (size_t si = 0; si < std::size(shapes); ++si)
        for (size_t ki = 0; ki < std::size(ks); ++ki) {
          if (t != DType::kF32 && ki > 1) continue;
          OpCase c{fmt::format("{}_s{}_k{}", upper ? "upper" : "lower", si, ki),
                   OpKind::kTrilu,
                   t,
                   {shapes[si]},
                   {}};
          c.typed.setInt(attr::Trilu::upper, upper);
          c.typed.setInt(attr::Trilu::k, ks[ki]);
          cases.push_back(std::move(c));
        }
  OpCase large{"large", OpKind::kTrilu, DType::kF32, {{16, 512, 512}}, {}, DType::kI64, 0, true};
  large.typed.setInt(attr::Trilu::upper, 1);
  large.typed.setInt(attr::Trilu::k, 1);
  cases.push_back(std::move(large));
  return cases;
}

std::vector<OpCase> allCases() {
  std::vector<OpCase> all;
  for (auto make :
       {addCases,       matmulCases,    indexSelectCases, catCases,       catGatherCases,
        mulCases,       reluCases,      transposeCases,   reshapeCases,   matmulVectorCases,
        convCases,      maxPoolCases,   avgPoolCases,     meanCases,      clipCases,
        sigmoidCases,   flattenCases,   squeezeCases,     unsqueezeCases, sliceCases,
        padCases,       batchNormCases, subCases,         divCases,       powCases,
        sqrtCases,      erfCases,       tanhCases,        geluCases,      softmaxCases,
        layerNormCases, reduceSumCases, whereCases,       expandCases,    castCases,
        gatherCases,    triluCases,     attentionCases})
    for (OpCase& c : make()) all.push_back(std::move(c));
  for (size_t i = 0; i < all.size(); ++i) all[i].seed = 1000 + i;
  return all;
}

// ---- running a case -------------------------------------------------------------------------

// The case's input tensors: random data, then (gather ops) an index of valid random positions.
std::vector<Tensor> makeInputs(const OpCase& c) {
  std::vector<Tensor> ins;
  for (size_t i = 0; i < c.shapes.size(); ++i)
    ins.push_back(randomTensor(c.dtype, c.shapes[i], c.seed * 16 + i));
  if (c.kind == OpKind::kIndexSelect || c.kind == OpKind::kCatGather) {
    const int d = c.shapes[0].wrapDim(*c.dim, "test");
    int64_t size = 0;
    for (const Shape& s : c.shapes) size += s[d];
    if (c.kind == OpKind::kIndexSelect) size = c.shapes[0][d];
    Tensor index(c.indexType, {c.indexCount});
    Rng rng(c.seed);
    const bool wrap = c.kind == OpKind::kIndexSelect && c.typed.i(attr::IndexSelect::wrap) == 1;
    for (int64_t j = 0; j < c.indexCount; ++j) {
      const int64_t v = rng.uniform(wrap ? -size : 0, size - 1);
      if (c.indexType == DType::kI32) {
        index.as<int32_t>()[j] = static_cast<int32_t>(v);
      } else {
        index.as<int64_t>()[j] = v;
      }
    }
    ins.push_back(std::move(index));
  }
  // Where: the condition in its own dtype (indexType), half of it zero.
  if (c.kind == OpKind::kWhere) {
    Tensor cond = randomTensor(c.indexType, c.shapes[0], c.seed * 16);
    dispatchDType(c.indexType, [&](auto tag) {
      using T = decltype(tag);
      T* p = cond.as<T>();
      for (int64_t i = 0; i < cond.numel(); ++i) {
        const int64_t v = std::is_floating_point_v<T> ? static_cast<int64_t>(p[i] * 64)
                                                      : static_cast<int64_t>(p[i]);
        p[i] = (v & 1) ? p[i] : T(0);
      }
    });
    ins[0] = std::move(cond);
  }
  // Gather: indices of any shape in [-size, size) (negative ones count from the end).
  if (c.kind == OpKind::kGather) {
    const int64_t size = c.shapes[0][c.shapes[0].wrapDim(c.typed.i(attr::Gather::axis), "test")];
    Tensor index(c.indexType, c.shapes[1]);
    Rng rng(c.seed);
    for (int64_t j = 0; j < index.numel(); ++j) {
      const int64_t v = rng.uniform(-size, size - 1);
      if (c.indexType == DType::kI32) {
        index.as<int32_t>()[j] = static_cast<int32_t>(v);
      } else {
        index.as<int64_t>()[j] = v;
      }
    }
    ins[1] = std::move(index);
  }
  // Cast from f32: values no integer holds, and NaN (the rule gives the integer's minimum), and
  // values that truncate toward zero.
  if (c.kind == OpKind::kCast && c.dtype == DType::kF32) {
    const float special[] = {std::numeric_limits<float>::quiet_NaN(),
                             std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity(),
                             3.5e9f,
                             -3.5e9f,
                             2147483648.0f,
                             -2147483648.0f,
                             9.3e18f,
                             -9.3e18f,
                             -2.75f,
                             2.75f};
    float* p = ins[0].as<float>();
    for (int64_t i = 0; i < ins[0].numel() && i < 64; ++i)
      p[i] = i < static_cast<int64_t>(std::size(special)) ? special[i] : p[i] * 1e6f;
  }
  // Attention's causal masks: -inf above the diagonal, 0 elsewhere (as the importer's trilu of
  // -inf writes); "causal_empty_row" also masks its first row entirely, which is NaN in the
  // reference as in the unfused softmax.
  if (c.kind == OpKind::kAttention && c.name.starts_with("causal")) {
    Tensor& m = ins[3];
    const int64_t rows = m.shape()[0], cols = m.shape()[1];
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        m.as<float>()[i * cols + j] = j > i || (i == 0 && c.name == "causal_empty_row")
                                          ? -std::numeric_limits<float>::infinity()
                                          : 0.0f;
  }
  // A variance is never negative (sqrt(var + eps) would be NaN in both kernels and prove nothing).
  if (c.kind == OpKind::kBatchNorm)
    for (int64_t i = 0; i < ins[4].numel(); ++i)
      ins[4].as<float>()[i] = std::fabs(ins[4].as<float>()[i]);
  return ins;
}

std::vector<TensorType> typesOf(const std::vector<Tensor>& ins) {
  std::vector<TensorType> types;
  for (const Tensor& t : ins) types.push_back({t.dtype(), t.shape()});
  return types;
}

std::vector<TensorView> viewsOf(const std::vector<Tensor>& ins) {
  std::vector<TensorView> views;
  for (const Tensor& t : ins) views.push_back(t.view());
  return views;
}

TensorType outputType(OpKind kind, const std::vector<TensorType>& types, const Attrs& attrs) {
  InferContext ctx{kind, types, attrs, nullptr, -1, "test"};
  return inferNode(ctx);
}

// An output tensor pre-filled with a byte pattern, so an element a kernel forgets to write
// cannot pass as the zero the allocator put there.
Tensor poisoned(const TensorType& t) {
  Tensor out(t.dtype, t.shape);
  if (out.bytes() > 0) std::memset(out.data(), 0x5A, out.bytes());
  return out;
}

Tensor runReference(const OpCase& c, const std::vector<Tensor>& ins) {
  const Attrs attrs = c.attrs();
  Tensor out = poisoned(outputType(c.kind, typesOf(ins), attrs));
  kernels::ref::runOp(c.kind, attrs, viewsOf(ins), out.view());
  return out;
}

// f32 GEMMs may sum in a different order than the reference loop: compare relative to the
// result's magnitude. Everything else (and integer GEMMs) must match bit for bit.
void expectMatches(const OpCase& c, const Tensor& expected, const Tensor& got) {
  ASSERT_EQ(expected.shape(), got.shape());
  // f32 GEMMs (matmul, conv2d) and float sums (avg pool, mean) may add in a different order
  // than the reference loop, which sums in double; BatchNorm's optimized kernel folds each
  // channel into one multiply-add (its file says why).
  const bool reordered = c.kind == OpKind::kMatMul || c.kind == OpKind::kConv2d ||
                         c.kind == OpKind::kAvgPool2d || c.kind == OpKind::kMean ||
                         c.kind == OpKind::kBatchNorm || c.kind == OpKind::kReduceSum;
  // Transcendental functions and normalisations: the optimized kernels evaluate Eigen's
  // vectorised approximations in f32, the reference libm in double; they must agree to a few
  // f32 ulps elementwise (NaN where the reference has NaN).
  // Attention adds f32 GEMMs (summed in another order than the double reference) around its
  // softmax: a looser bound, still elementwise.
  const bool approximate = c.kind == OpKind::kSoftmax || c.kind == OpKind::kLayerNorm ||
                           c.kind == OpKind::kErf || c.kind == OpKind::kTanh ||
                           c.kind == OpKind::kGelu || c.kind == OpKind::kSqrt ||
                           c.kind == OpKind::kAttention;
  const double tol = c.kind == OpKind::kAttention ? 1e-4 : 1e-5;
  if (approximate) {
    const float* e = expected.as<float>();
    const float* g = got.as<float>();
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < expected.numel(); ++i) {
      const bool ok = std::isnan(e[i]) ? std::isnan(g[i])
                                       : std::fabs(e[i] - g[i]) <= tol + tol * std::fabs(e[i]);
      if (!ok && bad++ == 0) first = i;
    }
    EXPECT_EQ(bad, 0) << "first mismatch at " << first << ": reference " << e[first] << ", got "
                      << g[first];
  } else if (reordered && c.dtype == DType::kF32) {
    double magnitude = 1.0;
    for (int64_t i = 0; i < expected.numel(); ++i)
      magnitude = std::max(magnitude, std::fabs(static_cast<double>(expected.as<float>()[i])));
    EXPECT_LE(maxAbsDiff(expected, got), 1e-4 * magnitude);
  } else {
    EXPECT_TRUE(expected.equals(got)) << "max abs diff " << maxAbsDiff(expected, got);
  }
}

class KernelDiff : public ::testing::TestWithParam<OpCase> {};

void checkOptimized(const OpCase& c, const std::vector<Tensor>& ins, const Tensor& expected);

// Every case runs on every ISA this machine has (compiler/cpu_isa.h): the kernels compiled per
// ISA (GEMM, elementwise, mean, transpose) each against the reference, spec compiled under that
// ISA.
void checkOnEveryIsa(const OpCase& c, const std::vector<Tensor>& ins, const Tensor& expected) {
  for (Isa isa : availableIsas()) {
    SCOPED_TRACE(fmt::format("isa {}", isaName(isa)));
    ScopedIsaOverride forced(isa);
    checkOptimized(c, ins, expected);
    // Transposes again through the staging buffer and non-temporal stores, which the kernel
    // takes only for outputs of a quarter of the last-level cache and more.
    if (c.kind == OpKind::kTranspose) {
      SCOPED_TRACE("streamed");
      kernels::ScopedTransposeStreamThreshold streamAll(0);
      checkOptimized(c, ins, expected);
    }
  }
}

TEST_P(KernelDiff, OptimizedMatchesReference) {
  const OpCase& c = GetParam();
  const std::vector<Tensor> ins = makeInputs(c);
  checkOnEveryIsa(c, ins, runReference(c, ins));
}

void checkOptimized(const OpCase& c, const std::vector<Tensor>& ins, const Tensor& expected) {
  auto spec = compileKernelSpec(makeKernelKey(c.kind, typesOf(ins), c.attrs()));
  ASSERT_FALSE(spec->generic);
  ASSERT_EQ(spec->output.shape, expected.shape());
  Tensor got = poisoned(spec->output);
  std::vector<const void*> ptrs;
  for (const Tensor& t : ins) ptrs.push_back(t.data());
  kernels::run(*spec, ptrs.data(), got.data());
  expectMatches(c, expected, got);

  // runViews on a static spec is the same kernel behind a shape check.
  Tensor viaViews = poisoned(spec->output);
  kernels::runViews(*spec, viewsOf(ins), viaViews.view());
  EXPECT_TRUE(viaViews.equals(got));

  if (c.large && tbb::this_task_arena::max_concurrency() > 1) {
    EXPECT_GT(spec->tasks, 1) << "work " << spec->work;
  } else if (!c.large) {
    EXPECT_EQ(spec->tasks, 1) << "work " << spec->work;
  }

  // The fused CatGather must equal the unfused reference pair it replaces.
  if (c.kind == OpKind::kCatGather) {
    const std::vector<TensorView> views = viewsOf(ins);
    const std::span<const TensorView> data(views.data(), views.size() - 1);
    std::vector<TensorType> dataTypes(typesOf(ins));
    dataTypes.pop_back();
    Tensor catted = poisoned(outputType(OpKind::kCat, dataTypes, Attrs{c.dim}));
    kernels::ref::cat(data, *c.dim, catted.view());
    Tensor unfused = poisoned(spec->output);
    kernels::ref::indexSelect(catted.view(), views.back(), *c.dim, unfused.view());
    EXPECT_TRUE(unfused.equals(got));
  }
}

// Shape-generic specs over the same table minus the large shapes, which would only add run
// time: a generic spec derives the same parameters as a static one, checked above.
class KernelGenericDiff : public ::testing::TestWithParam<OpCase> {};

void checkGeneric(const OpCase& c, const std::vector<Tensor>& ins, const Tensor& expected);

TEST_P(KernelGenericDiff, GenericSpecMatchesReference) {
  const OpCase& c = GetParam();
  const std::vector<Tensor> ins = makeInputs(c);
  checkGeneric(c, ins, runReference(c, ins));
}

void checkGeneric(const OpCase& c, const std::vector<Tensor>& ins, const Tensor& expected) {
  // Every dim unknown: the kernel can decide nothing until it sees the views.
  std::vector<TensorType> dynamic = typesOf(ins);
  for (TensorType& t : dynamic)
    for (int d = 0; d < t.shape.rank(); ++d) t.shape[d] = kAnyDim;
  const KernelKey key = makeKernelKey(c.kind, dynamic, c.attrs());
  auto spec = compileKernelSpec(key);
  EXPECT_EQ(spec->generic, !key.isStatic());
  if (spec->generic) {
    EXPECT_TRUE(std::holds_alternative<std::monostate>(spec->params));
  }
  Tensor got = poisoned(TensorType{expected.dtype(), expected.shape()});
  kernels::runViews(*spec, viewsOf(ins), got.view());
  expectMatches(c, expected, got);
}

std::string paramName(const ::testing::TestParamInfo<OpCase>& info) {
  return caseName(info.param);
}

std::vector<OpCase> smallCases() {
  std::vector<OpCase> small = allCases();
  std::erase_if(small, [](const OpCase& c) { return c.large; });
  return small;
}

INSTANTIATE_TEST_SUITE_P(Kernels, KernelDiff, ::testing::ValuesIn(allCases()), paramName);
INSTANTIATE_TEST_SUITE_P(Kernels, KernelGenericDiff, ::testing::ValuesIn(smallCases()), paramName);

// ---- random shapes for the ops the table above covers with fixed shapes only -----------------
//
// expand, cast, gather, trilu and reduce_sum: one test each over a few seeded random cases
// (kept out of the parameterised table, whose every case is a test of its own), optimized vs
// reference on every ISA and the shape-generic spec, like a table case. Each set must hold a
// dim of size 1 and an odd size above 1, so a generator change cannot quietly lose them.
//
// `count` cases from make(rng, j), the shapes drawn from Rng(seed), the data from seeds after it.
void expectRandomCasesMatch(uint64_t seed, int count,
                            const std::function<OpCase(Rng&, int)>& make) {
  Rng rng(seed);
  bool sawOne = false, sawOdd = false;
  auto see = [&](const Shape& s) {
    for (int64_t d : s) {
      sawOne |= d == 1;
      sawOdd |= d > 1 && d % 2 == 1;
    }
  };
  for (int j = 0; j < count; ++j) {
    OpCase c = make(rng, j);
    c.name = fmt::format("random{}", j);
    c.seed = seed * 100 + static_cast<uint64_t>(j);
    for (const Shape& s : c.shapes) see(s);
    if (c.shape) see(*c.shape);
    std::ostringstream what;
    PrintTo(c, &what);
    SCOPED_TRACE(what.str());
    const std::vector<Tensor> ins = makeInputs(c);
    const Tensor expected = runReference(c, ins);
    checkOnEveryIsa(c, ins, expected);
    checkGeneric(c, ins, expected);
  }
  EXPECT_TRUE(sawOne) << "no dim of size 1 among the random shapes";
  EXPECT_TRUE(sawOdd) << "no odd size among the random shapes";
}

TEST(KernelRandomShapes, Expand) {
  // New leading dims, size-1 dims of x broadcast up, target 1s that keep x's dims.
  expectRandomCasesMatch(2800, 8, [](Rng& rng, int j) {
    const Shape x = randomShape(rng, 0, 4);
    Shape target;
    for (int64_t lead = rng.uniform(0, 2); lead > 0; --lead) target.push(randomDim(rng));
    for (int64_t d : x)
      target.push(d == 1 ? (rng.chance(2) ? 1 : randomDim(rng)) : rng.chance(4) ? 1 : d);
    OpCase c{"", OpKind::kExpand, kAllDTypes[j % 3], {x}, {}};
    c.shape = target;
    return c;
  });
}

TEST(KernelRandomShapes, Cast) {
  // Every (from, to) pair once.
  expectRandomCasesMatch(2900, 9, [](Rng& rng, int j) {
    OpCase c{"", OpKind::kCast, kAllDTypes[j % 3], {randomShape(rng, 0, 4)}, {}};
    c.typed.setInt(attr::Cast::to, std::array<int64_t, 3>{1, 6, 7}[j / 3]);
    return c;
  });
}

TEST(KernelRandomShapes, Gather) {
  expectRandomCasesMatch(3000, 8, [](Rng& rng, int j) {
    Shape data = randomShape(rng, 1, 3);
    const int64_t axis = rng.uniform(-data.rank(), data.rank() - 1);
    const int a = data.wrapDim(axis, "test");
    if (data[a] == 0) data[a] = rng.uniform(1, 9);  // indices need a row to point at
    OpCase c{"", OpKind::kGather,   kAllDTypes[j % 3], {data, randomShape(rng, 0, 2)},
             {}, kIndexTypes[j % 2]};
    c.typed.setInt(attr::Gather::axis, axis);
    return c;
  });
}

TEST(KernelRandomShapes, Trilu) {
  // k from below the first column to past the last one.
  expectRandomCasesMatch(3100, 8, [](Rng& rng, int j) {
    const Shape x = randomShape(rng, 2, 4);
    const int64_t rows = x[x.rank() - 2], cols = x[x.rank() - 1];
    OpCase c{"", OpKind::kTrilu, kAllDTypes[j % 3], {x}, {}};
    c.typed.setInt(attr::Trilu::upper, j % 2);
    c.typed.setInt(attr::Trilu::k, rng.uniform(-rows - 1, cols + 1));
    return c;
  });
}

TEST(KernelRandomShapes, ReduceSum) {
  // A random non-empty set of axes, negative or not, kept or dropped.
  expectRandomCasesMatch(3200, 8, [](Rng& rng, int j) {
    const Shape x = randomShape(rng, 1, 4);
    std::vector<int64_t> axes;
    for (int d = 0; d < x.rank(); ++d)
      if (rng.chance(2)) axes.push_back(rng.chance(2) ? d - x.rank() : d);
    if (axes.empty()) axes.push_back(rng.uniform(0, x.rank() - 1));
    OpCase c{"", OpKind::kReduceSum, DType::kF32, {x}, {}};
    c.typed.setInts(attr::ReduceSum::axes, axes);
    c.typed.setInt(attr::ReduceSum::keepdims, j % 2);
    return c;
  });
}

// ---- index errors ---------------------------------------------------------------------------

struct IndexErrorCase {
  const char* name;
  OpKind kind;
  std::vector<Shape> data;
  int64_t dim;
  DType indexType;
  std::vector<int64_t> index;
  const char* message;
};

Tensor indexTensor(DType t, const std::vector<int64_t>& values) {
  Tensor index(t, {static_cast<int64_t>(values.size())});
  for (size_t j = 0; j < values.size(); ++j) {
    if (t == DType::kI32) {
      index.as<int32_t>()[j] = static_cast<int32_t>(values[j]);
    } else {
      index.as<int64_t>()[j] = values[j];
    }
  }
  return index;
}

template <typename Fn>
void expectIndexError(const char* what, const std::string& message, Fn&& fn) {
  try {
    fn();
    ADD_FAILURE() << what << ": expected an index error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIndex) << what;
    EXPECT_EQ(std::string(e.what()), message) << what;
  }
}

TEST(KernelIndex, OutOfRangeThrowsInBothKernels) {
  const IndexErrorCase cases[] = {
      {"too_large",
       OpKind::kIndexSelect,
       {{4, 3}},
       0,
       DType::kI64,
       {0, 5, 1},
       "index value 5 at position 1 is out of range for dim 0 of size 4"},
      {"equal_to_size",
       OpKind::kIndexSelect,
       {{4, 3}},
       0,
       DType::kI32,
       {4},
       "index value 4 at position 0 is out of range for dim 0 of size 4"},
      {"negative",
       OpKind::kIndexSelect,
       {{4, 3}},
       -1,
       DType::kI32,
       {2, -1},
       "index value -1 at position 1 is out of range for dim 1 of size 3"},
      {"first_of_many",
       OpKind::kIndexSelect,
       {{4, 3}},
       0,
       DType::kI64,
       {1, 9, -3},
       "index value 9 at position 1 is out of range for dim 0 of size 4"},
      {"empty_output",
       OpKind::kIndexSelect,
       {{0, 4}},
       1,
       DType::kI64,
       {4},
       "index value 4 at position 0 is out of range for dim 1 of size 4"},
      {"cat_gather",
       OpKind::kCatGather,
       {{2, 3}, {2, 5}},
       1,
       DType::kI32,
       {7, 8},
       "index value 8 at position 1 is out of range for dim 1 of size 8"},
      {"cat_gather_negative",
       OpKind::kCatGather,
       {{2, 3}, {1, 3}},
       0,
       DType::kI64,
       {-2},
       "index value -2 at position 0 is out of range for dim 0 of size 3"},
  };
  for (const IndexErrorCase& c : cases) {
    std::vector<Tensor> ins;
    for (const Shape& s : c.data) ins.push_back(randomTensor(DType::kF32, s, 5));
    ins.push_back(indexTensor(c.indexType, c.index));
    const Attrs attrs{c.dim};
    const TensorType outType = outputType(c.kind, typesOf(ins), attrs);
    Tensor out(outType.dtype, outType.shape);
    expectIndexError(c.name, c.message,
                     [&] { kernels::ref::runOp(c.kind, attrs, viewsOf(ins), out.view()); });
    auto spec = compileKernelSpec(makeKernelKey(c.kind, typesOf(ins), attrs));
    std::vector<const void*> ptrs;
    for (const Tensor& t : ins) ptrs.push_back(t.data());
    expectIndexError(c.name, c.message, [&] { kernels::run(*spec, ptrs.data(), out.data()); });
  }
}

TEST(KernelIndex, WrapTakesNegativeIndicesFromTheEndAndRefusesBelowMinusSize) {
  Attrs attrs{0};
  attrs.setInt(attr::IndexSelect::wrap, 1);
  Tensor data(DType::kF32, {4, 2});
  for (int64_t i = 0; i < 8; ++i) data.as<float>()[i] = static_cast<float>(i);
  for (DType it : {DType::kI32, DType::kI64}) {
    const std::vector<Tensor> ins = {data, indexTensor(it, {-1, 0, -4, 2})};
    const TensorType outType = outputType(OpKind::kIndexSelect, typesOf(ins), attrs);
    auto spec = compileKernelSpec(makeKernelKey(OpKind::kIndexSelect, typesOf(ins), attrs));
    EXPECT_NE(spec->name.find("__wrap=1"), std::string::npos) << spec->name;
    Tensor ref(outType.dtype, outType.shape), opt(outType.dtype, outType.shape);
    kernels::ref::runOp(OpKind::kIndexSelect, attrs, viewsOf(ins), ref.view());
    const void* ptrs[] = {ins[0].data(), ins[1].data()};
    kernels::run(*spec, ptrs, opt.data());
    const std::vector<float> want = {6, 7, 0, 1, 0, 1, 4, 5};  // rows 3, 0, 0, 2
    for (int64_t i = 0; i < 8; ++i) {
      EXPECT_EQ(ref.as<float>()[i], want[i]) << i;
      EXPECT_EQ(opt.as<float>()[i], want[i]) << i;
    }
    const std::vector<Tensor> bad = {data, indexTensor(it, {1, -5})};
    Tensor out(DType::kF32, {2, 2});
    const std::string msg = "index value -5 at position 1 is out of range for dim 0 of size 4";
    expectIndexError("ref", msg, [&] {
      kernels::ref::runOp(OpKind::kIndexSelect, attrs, viewsOf(bad), out.view());
    });
    auto badSpec = compileKernelSpec(makeKernelKey(OpKind::kIndexSelect, typesOf(bad), attrs));
    const void* badPtrs[] = {bad[0].data(), bad[1].data()};
    expectIndexError("opt", msg, [&] { kernels::run(*badSpec, badPtrs, out.data()); });
  }
}

// ---- compile decisions ----------------------------------------------------------------------

std::shared_ptr<const KernelSpec> compile(OpKind kind, std::vector<TensorType> inputs,
                                          std::optional<int64_t> dim = {}) {
  return compileKernelSpec(makeKernelKey(kind, inputs, Attrs{dim}));
}

TensorType f32(Shape s) {
  return {DType::kF32, s};
}

TEST(KernelSpec, TaskSplitFollowsTheShape) {
  const bool threads = tbb::this_task_arena::max_concurrency() > 1;
  struct Case {
    const char* name;
    OpKind kind;
    std::vector<TensorType> inputs;
    std::optional<int64_t> dim;
    bool large;
  };
  const Case cases[] = {
      {"add_1", OpKind::kAdd, {f32({1}), f32({1})}, {}, false},
      // Memory ops split from 2 MiB moved (kParallelByteThreshold): 1 MiB read + 1 MiB written.
      {"add_128k", OpKind::kAdd, {f32({128, 1024}), f32({1024})}, {}, false},
      {"add_256k", OpKind::kAdd, {f32({256, 1024}), f32({1024})}, {}, true},
      {"add_4M", OpKind::kAdd, {f32({4096, 1024}), f32({4096, 1024})}, {}, true},
      // MatMul splits from 0.5 MFLOP (compiler/ops/matmul.cpp): 48^3 is 0.22, 64^3 0.52.
      {"matmul_48", OpKind::kMatMul, {f32({48, 48}), f32({48, 48})}, {}, false},
      {"matmul_64", OpKind::kMatMul, {f32({64, 64}), f32({64, 64})}, {}, true},
      {"matmul_128", OpKind::kMatMul, {f32({128, 128}), f32({128, 128})}, {}, true},
      {"matmul_256", OpKind::kMatMul, {f32({256, 256}), f32({256, 256})}, {}, true},
      {"matmul_1024", OpKind::kMatMul, {f32({1024, 1024}), f32({1024, 1024})}, {}, true},
      {"index_select_small", OpKind::kIndexSelect, {f32({64, 64}), {DType::kI64, {64}}}, 0, false},
      {"index_select_16M",
       OpKind::kIndexSelect,
       {f32({4096, 1024}), {DType::kI64, {4096}}},
       0,
       true},
      {"cat_small", OpKind::kCat, {f32({2, 3}), f32({2, 5})}, 1, false},
      {"cat_16M", OpKind::kCat, {f32({4096, 512}), f32({4096, 512})}, 1, true},
  };
  for (const Case& c : cases) {
    auto spec = compile(c.kind, c.inputs, c.dim);
    if (c.large && threads) {
      EXPECT_GT(spec->tasks, 1) << c.name;
      EXPECT_LE(spec->tasks, tbb::this_task_arena::max_concurrency()) << c.name;
    } else {
      EXPECT_EQ(spec->tasks, 1) << c.name;
    }
  }
}

TEST(KernelSpec, StreamingStoresOnlyForLargeOutputsOfLongRows) {
  // Decided by shape alone; the streamed kernels are checked against the reference by the
  // *_streaming cases of KernelDiff.
  struct Case {
    const char* name;
    OpKind kind;
    std::vector<TensorType> inputs;
    std::optional<int64_t> dim;
    bool streaming;
  };
  const Case cases[] = {
      {"add_16MiB", OpKind::kAdd, {f32({4 << 20}), f32({4 << 20})}, {}, true},
      {"add_16MiB_scalar", OpKind::kAdd, {f32({4 << 20}), f32({})}, {}, true},
      {"add_16MiB_rows", OpKind::kAdd, {f32({4096, 1024}), f32({1024})}, {}, true},
      {"add_16MiB_short_rows", OpKind::kAdd, {f32({1 << 20, 4}), f32({4})}, {}, false},
      {"add_16MiB_general", OpKind::kAdd, {f32({4096, 1}), f32({1, 1024})}, {}, false},
      {"add_1MiB", OpKind::kAdd, {f32({1 << 18}), f32({1 << 18})}, {}, false},
      {"cat_1MiB", OpKind::kCat, {f32({256, 512}), f32({256, 512})}, 1, false},
      {"cat_16MiB", OpKind::kCat, {f32({4096, 512}), f32({4096, 512})}, 1, true},
      {"cat_16MiB_short_input", OpKind::kCat, {f32({4096, 1020}), f32({4096, 4})}, 1, false},
      {"index_select_16MiB",
       OpKind::kIndexSelect,
       {f32({4096, 1024}), {DType::kI64, {4096}}},
       0,
       true},
      {"index_select_16MiB_elements",
       OpKind::kIndexSelect,
       {f32({4 << 20}), {DType::kI64, {4 << 20}}},
       0,
       false},
      {"cat_gather_16MiB",
       OpKind::kCatGather,
       {f32({2048, 1024}), f32({2048, 1024}), {DType::kI32, {4096}}},
       0,
       true},
  };
  for (const Case& c : cases) {
    auto spec = compile(c.kind, c.inputs, c.dim);
    bool streaming = false;
    if (const auto* p = std::get_if<CatParams>(&spec->params)) streaming = p->streamingStores;
    if (const auto* p = std::get_if<GatherParams>(&spec->params)) streaming = p->streamingStores;
    if (const auto* p = std::get_if<CatGatherParams>(&spec->params)) streaming = p->streamingStores;
    if (const auto* p = std::get_if<AddParams>(&spec->params)) streaming = p->streamingStores;
    EXPECT_EQ(streaming, c.streaming) << c.name;
  }
}

TEST(KernelSpec, AddChoosesTheCheapestPath) {
  using Path = AddParams::Path;
  struct Case {
    Shape a, b;
    Path path;
  };
  const Case cases[] = {
      {{2, 3}, {2, 3}, Path::kSameShape}, {{1, 7}, {7}, Path::kSameShape},
      {{4, 5}, {}, Path::kScalarB},       {{1, 1}, {3, 2}, Path::kScalarA},
      {{6, 5}, {5}, Path::kRowB},         {{1, 4, 5}, {3, 4, 5}, Path::kRowA},
      {{3, 1}, {1, 4}, Path::kGeneral},   {{6, 5}, {6, 1}, Path::kGeneral},
  };
  for (const Case& c : cases) {
    auto spec = compile(OpKind::kAdd, {f32(c.a), f32(c.b)});
    const auto& p = std::get<AddParams>(spec->params);
    EXPECT_EQ(p.path, c.path) << c.a.toString() << " + " << c.b.toString();
  }
  // Row paths record the row length; the general path coalesces [2, 3, 4] + [4] style dims.
  auto row = compile(OpKind::kAdd, {f32({3, 4, 5}), f32({4, 5})});
  EXPECT_EQ(std::get<AddParams>(row->params).cols, 20);
  EXPECT_EQ(std::get<AddParams>(row->params).rows, 3);
  auto general = compile(OpKind::kAdd, {f32({2, 3, 4, 5}), f32({2, 1, 1, 5})});
  const auto& g = std::get<AddParams>(general->params);
  EXPECT_EQ(g.rank, 3);  // [2, 12, 5]: the two broadcast dims of b merge into one
  EXPECT_EQ(g.bStrides[1], 0);
}

TEST(KernelSpec, MatMulBatchOffsetsAndFolding) {
  auto folded = compile(OpKind::kMatMul, {f32({4, 3, 5}), f32({5, 2})});
  const auto& f = std::get<MatMulParams>(folded->params);
  EXPECT_EQ(f.batch, 1);
  EXPECT_EQ(f.m, 12);
  auto bcast = compile(OpKind::kMatMul, {f32({2, 1, 3, 4}), f32({5, 4, 6})});
  const auto& b = std::get<MatMulParams>(bcast->params);
  EXPECT_EQ(b.batch, 10);
  EXPECT_EQ(b.aOffsets, (std::vector<int64_t>{0, 0, 0, 0, 0, 12, 12, 12, 12, 12}));
  EXPECT_EQ(b.bOffsets, (std::vector<int64_t>{0, 24, 48, 72, 96, 0, 24, 48, 72, 96}));
  if (tbb::this_task_arena::max_concurrency() > 1) {
    // Rows on every ISA's path: N = 64 has no second column block.
    auto big = compile(OpKind::kMatMul, {f32({1024, 256}), f32({256, 64})});
    EXPECT_GT(std::get<MatMulParams>(big->params).rowsPerTask, 0);
  }
}

TEST(KernelSpec, NamesAreReadableAndExact) {
  EXPECT_EQ(compile(OpKind::kMatMul, {f32({64, 128}), f32({128, 32})})->name,
            "MatMul_float_ND_64_128__128_32");
  EXPECT_EQ(compile(OpKind::kCat, {f32({2, 3}), f32({2, 5})}, -1)->name,
            "Cat_float_ND_2_3__2_5__dim1");
  EXPECT_EQ(compile(OpKind::kAdd, {{DType::kI64, {4}}, {DType::kI64, {}}})->name,
            "Add_int64_ND_4__s");
  EXPECT_EQ(compile(OpKind::kIndexSelect, {f32({4, 5}), {DType::kI32, {3}}}, 0)->name,
            "IndexSelect_float_ND_4_5__3_int32__dim0");
  EXPECT_EQ(compile(OpKind::kAdd, {f32({symbolDim("B"), 4}), f32({4})})->name,
            "Add_float_ND_-1_4__4");
}

TEST(KernelSpec, KeyEqualityAndHash) {
  const KernelKey a = makeKernelKey(OpKind::kCat, {f32({2, 3}), f32({2, 5})}, Attrs{-1});
  const KernelKey same = makeKernelKey(OpKind::kCat, {f32({2, 3}), f32({2, 5})}, Attrs{1});
  EXPECT_EQ(a, same);  // -1 and 1 wrap to the same dim for rank 2
  EXPECT_EQ(a.hash(), same.hash());
  const KernelKey different[] = {
      makeKernelKey(OpKind::kCat, {f32({2, 3}), f32({2, 5})}, Attrs{0}),
      makeKernelKey(OpKind::kCat, {f32({2, 3}), f32({2, 4})}, Attrs{1}),
      makeKernelKey(OpKind::kCat, {{DType::kI32, {2, 3}}, {DType::kI32, {2, 5}}}, Attrs{1}),
      makeKernelKey(OpKind::kCat, {f32({2, 5}), f32({2, 3})}, Attrs{1}),
      makeKernelKey(OpKind::kCat, {f32({2, 3})}, Attrs{1}),
  };
  std::unordered_set<KernelKey> set{a};
  for (const KernelKey& k : different) {
    EXPECT_NE(k, a) << k.name();
    EXPECT_TRUE(set.insert(k).second) << k.name();
  }
  EXPECT_FALSE(set.insert(same).second);
  const KernelKey i32 = makeKernelKey(OpKind::kIndexSelect, {f32({4}), {DType::kI32, {2}}}, {0});
  const KernelKey i64 = makeKernelKey(OpKind::kIndexSelect, {f32({4}), {DType::kI64, {2}}}, {0});
  EXPECT_NE(i32, i64);
  EXPECT_NE(i32.name(), i64.name());
}

TEST(KernelSpec, GenericSpecDefersToRunTime) {
  const int64_t b = symbolDim("B");
  auto spec = compile(OpKind::kMatMul, {f32({b, 3, 4}), f32({4, kAnyDim})});
  EXPECT_TRUE(spec->generic);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(spec->params));
  EXPECT_EQ(spec->output.shape, Shape({b, 3, kAnyDim}));
  const Tensor x = randomTensor(DType::kF32, {2, 3, 4}, 1);
  const Tensor w = randomTensor(DType::kF32, {4, 5}, 2);
  Tensor expected(DType::kF32, {2, 3, 5}), got(DType::kF32, {2, 3, 5});
  kernels::ref::matmul(x.view(), w.view(), expected.view());
  const TensorView views[] = {x.view(), w.view()};
  kernels::runViews(*spec, views, got.view());
  EXPECT_TRUE(expected.equals(got));
  // The generic kernel's static dims still bind: K was compiled as 4.
  const Tensor bad = randomTensor(DType::kF32, {2, 3, 5}, 3);
  const TensorView badViews[] = {bad.view(), w.view()};
  EXPECT_THROW(kernels::runViews(*spec, badViews, got.view()), Error);
  // A generic spec has nothing to run without shapes.
  const void* ptrs[] = {x.data(), w.data()};
  EXPECT_THROW(kernels::run(*spec, ptrs, got.data()), Error);
}

TEST(KernelSpec, BadShapesAreShapeErrors) {
  try {
    compile(OpKind::kMatMul, {f32({2, 3}), f32({4, 5})});
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kShape);
  }
  EXPECT_THROW(compile(OpKind::kCat, {f32({2, 3})}, 2), Error);
  // A static spec checks the views it is given.
  auto spec = compile(OpKind::kAdd, {f32({2, 3}), f32({3})});
  const Tensor a = randomTensor(DType::kF32, {2, 4}, 1), b = randomTensor(DType::kF32, {3}, 2);
  Tensor out(DType::kF32, {2, 3});
  const TensorView views[] = {a.view(), b.view()};
  try {
    kernels::runViews(*spec, views, out.view());
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kShape);
  }
}

// ---- the fork-join pool behind the kernels' splits (executor/fork_join.h) ---------------------

struct ForkJoinProbe {
  std::atomic<int> runs[4] = {};
  std::thread::id ids[4];
};
void probeTask(void* ctx, int t) {
  auto* probe = static_cast<ForkJoinProbe*>(ctx);
  probe->ids[t] = std::this_thread::get_id();
  probe->runs[t].fetch_add(1);
}
// Task 0 (the caller's) waits until task 1 has started, at most 10 s: the caller runs a task no
// worker started only after its own, so task 1 then ran on a worker, woken if it slept.
void waitingProbeTask(void* ctx, int t) {
  auto* probe = static_cast<ForkJoinProbe*>(ctx);
  if (t == 0) {
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (probe->runs[1].load() == 0 && std::chrono::steady_clock::now() < limit)
      std::this_thread::yield();
  }
  probeTask(ctx, t);
}
bool poolCanSplit() {
  return gearbox::detail::usableCpus() >= 2;
}

TEST(ForkJoin, RunsEachTaskOnceTheCallerRunningTaskZeroAndWhatNoWorkerStarted) {
  const long long before = gearbox::detail::forkJoinStats().runs;
  for (int round = 0; round < 50; ++round) {
    ForkJoinProbe probe;
    const bool ran = gearbox::detail::forkJoin(2, probeTask, &probe);
    ASSERT_EQ(ran, poolCanSplit());
    if (!ran) {
      EXPECT_EQ(probe.runs[0].load() + probe.runs[1].load(), 0) << "refused, yet ran";
      continue;
    }
    EXPECT_EQ(probe.runs[0].load(), 1);
    EXPECT_EQ(probe.runs[1].load(), 1);
    EXPECT_EQ(probe.ids[0], std::this_thread::get_id());
    // Task 1 ran on a worker, or on the caller if the worker had not started it by then.
    ForkJoinProbe waited;
    ASSERT_TRUE(gearbox::detail::forkJoin(2, waitingProbeTask, &waited));
    EXPECT_EQ(waited.runs[1].load(), 1);
    EXPECT_NE(waited.ids[1], std::this_thread::get_id());
  }
  EXPECT_EQ(gearbox::detail::forkJoinStats().runs - before, poolCanSplit() ? 100 : 0);
  // One task, or more than the machine has threads: not the pool's (the caller splits itself).
  ForkJoinProbe probe;
  EXPECT_FALSE(gearbox::detail::forkJoin(1, probeTask, &probe));
  EXPECT_FALSE(gearbox::detail::forkJoin(gearbox::detail::usableCpus() + 1, probeTask, &probe));
  EXPECT_EQ(probe.runs[0].load(), 0);
}

#if defined(__linux__)
// The pool's size counts the CPUs the process may use, not the machine's: a thread pinned to one
// CPU (as `taskset -c 0` pins a process) sees one.
TEST(ForkJoin, UsableCpusFollowTheAffinityMask) {
  cpu_set_t all;
  CPU_ZERO(&all);
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  EXPECT_EQ(gearbox::detail::usableCpus(), CPU_COUNT(&all));
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  int seen = -1;
  // In a thread of its own, so the test's thread keeps its mask.
  std::thread pinned([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    if (sched_setaffinity(0, sizeof(one), &one) == 0) seen = gearbox::detail::usableCpus();
  });
  pinned.join();
  EXPECT_EQ(seen, 1);
}
#endif

#if defined(__linux__)
// After an idle gap the scheduler may wake a worker on its caller's CPU (near its waker) and
// leave both there while the other CPU idles, so a split runs at one thread's speed. A worker
// that finds itself on the CPU of the split's caller moves off it. Here the caller pins itself
// to the CPU its worker is spinning on; the worker must move (counted in stats().moves) and run
// the next split's task beside it. Retried (up to 10 s) in case the load balancer moved the
// worker first, which would leave nothing for the pool to do.
TEST(ForkJoin, AWorkerOnTheCallersCpuMovesOff) {
  if (!poolCanSplit()) {
    // One usable CPU: the pool has no worker to move and refuses the split.
    ForkJoinProbe probe;
    EXPECT_FALSE(gearbox::detail::forkJoin(2, probeTask, &probe));
    EXPECT_EQ(gearbox::detail::forkJoinStats().moves, 0);
    return;
  }
  struct Seen {
    std::atomic<int> cpu{-1};
    std::atomic<bool> worker{false};
    std::thread::id caller;
  };
  // Task 0 waits (at most 10 s) until task 1 has run, so task 1 runs on the worker.
  auto body = [](void* c, int t) {
    auto* s = static_cast<Seen*>(c);
    if (t == 1) {
      s->worker = std::this_thread::get_id() != s->caller;
      s->cpu = sched_getcpu();
      return;
    }
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (s->cpu.load() < 0 && std::chrono::steady_clock::now() < limit) std::this_thread::yield();
  };
  auto workerCpu = [&] {
    Seen s;
    s.caller = std::this_thread::get_id();
    EXPECT_TRUE(gearbox::detail::forkJoin(2, body, &s));
    return s.worker.load() ? s.cpu.load() : -1;
  };
  const long long before = gearbox::detail::forkJoinStats().moves;
  bool moved = false, besides = false;
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!(moved && besides) && std::chrono::steady_clock::now() < limit) {
    const int w = workerCpu();  // on the test's thread, whose mask stays whole
    if (w < 0) continue;
    // In a thread of its own, pinned to the worker's CPU.
    std::thread pinned([&] {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(w, &one);
      if (sched_setaffinity(0, sizeof(one), &one) != 0) return;
      for (int i = 0; i < 20 && !besides; ++i) {
        const int c = workerCpu();
        besides = c >= 0 && c != w;
      }
    });
    pinned.join();
    moved = gearbox::detail::forkJoinStats().moves > before;
  }
  EXPECT_TRUE(moved) << "the worker never moved off its caller's CPU";
  EXPECT_TRUE(besides) << "the worker never ran a task beside its pinned caller";
}
#endif

// runItems gives each task a range of its own and lets a task that is done take the others'
// items: every item runs exactly once, whatever the split, including counts that do not divide,
// fewer items than tasks, and more tasks than its inline cursors (8).
TEST(ForkJoin, RunItemsRunsEveryItemOnce) {
  for (int tasks : {1, 2, 3, 4, 9, 12}) {
    for (int64_t n : {0, 1, 2, 3, 7, 60, 61, 1000, 4097}) {
      std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
      gearbox::kernels::detail::runItems(tasks, n, [&](int64_t i) {
        runs[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
      });
      int64_t wrong = 0;
      for (const auto& r : runs) wrong += r.load() != 1;
      EXPECT_EQ(wrong, 0) << "items run other than once: " << wrong << " of " << n << ", " << tasks
                          << " tasks";
    }
  }
}

// Each task runs its own range in order, and a thief takes a range's next item: so on every
// thread the items of any one range run in increasing order.
TEST(ForkJoin, RunItemsRunsEachRangeInOrder) {
  for (int tasks : {2, 3, 4}) {
    for (int64_t n : {2, 7, 61, 1000}) {
      const int used = static_cast<int>(std::min<int64_t>(tasks, n));
      std::vector<std::thread::id> by(static_cast<size_t>(n));
      std::vector<int64_t> order(static_cast<size_t>(n));
      std::atomic<int64_t> clock{0};
      gearbox::kernels::detail::runItems(tasks, n, [&](int64_t i) {
        by[static_cast<size_t>(i)] = std::this_thread::get_id();
        order[static_cast<size_t>(i)] = clock.fetch_add(1);
      });
      // Within a range, an item that ran on the same thread as a later one ran before it.
      for (int t = 0; t < used; ++t) {
        const int64_t b = n / used * t + n % used * t / used;
        const int64_t e = n / used * (t + 1) + n % used * (t + 1) / used;
        for (int64_t i = b; i < e; ++i)
          for (int64_t j = i + 1; j < e; ++j)
            if (by[static_cast<size_t>(i)] == by[static_cast<size_t>(j)]) {
              ASSERT_LT(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)])
                  << "range " << t << ": item " << j << " ran before item " << i;
            }
      }
    }
  }
}

TEST(ForkJoin, ATaskExceptionIsRethrownAfterEveryTaskFinished) {
  if (!poolCanSplit()) GTEST_SKIP() << "one usable CPU: the pool never splits";
  struct Ctx {
    std::atomic<int> finished{0};
    int thrower;
  };
  for (int thrower : {0, 1}) {
    Ctx ctx{{0}, thrower};
    auto body = [](void* c, int t) {
      auto* x = static_cast<Ctx*>(c);
      if (t == x->thrower) throw std::runtime_error("task failed");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // finishes after the thrower
      x->finished.fetch_add(1);
    };
    EXPECT_THROW(gearbox::detail::forkJoin(2, body, &ctx), std::runtime_error);
    EXPECT_EQ(ctx.finished.load(), 1) << "returned before the other task finished";
  }
  ForkJoinProbe probe;  // released: the next split runs
  EXPECT_TRUE(gearbox::detail::forkJoin(2, probeTask, &probe));
}

TEST(ForkJoin, ANestedSplitIsRefusedSoTheCallerUsesOneTbb) {
  if (!poolCanSplit()) GTEST_SKIP() << "one usable CPU: the pool never splits";
  std::atomic<int> nested[2] = {-1, -1};
  auto body = [](void* c, int t) {
    ForkJoinProbe inner;
    static_cast<std::atomic<int>*>(c)[t] = gearbox::detail::forkJoin(2, probeTask, &inner) ? 1 : 0;
  };
  ASSERT_TRUE(gearbox::detail::forkJoin(2, body, nested));
  EXPECT_EQ(nested[0].load(), 0);  // the pool is held by this split
  EXPECT_EQ(nested[1].load(), 0);  // a worker never splits on the pool
}

TEST(ForkJoin, SleepingWorkersWakeForEverySplit) {
  if (!poolCanSplit()) GTEST_SKIP() << "one usable CPU: the pool never splits";
  // No spin: every split after a pause finds its worker asleep (a lost wake-up would hang here).
  const auto previous = gearbox::detail::setForkJoinSpin(std::chrono::microseconds(0));
  for (int round = 0; round < 100; ++round) {
    if (round % 10 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ForkJoinProbe probe;
    ASSERT_TRUE(gearbox::detail::forkJoin(2, waitingProbeTask, &probe));
    ASSERT_EQ(probe.runs[1].load(), 1);
    ASSERT_NE(probe.ids[1], std::this_thread::get_id()) << "the worker never woke";
  }
  // A sleeping worker's task the caller ran itself: the split is done, and the worker, when it
  // wakes, finds the task taken and runs nothing twice.
  for (int round = 0; round < 20; ++round) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    ForkJoinProbe probe;
    ASSERT_TRUE(gearbox::detail::forkJoin(2, probeTask, &probe));
    ASSERT_EQ(probe.runs[0].load(), 1);
    ASSERT_EQ(probe.runs[1].load(), 1);
  }
  gearbox::detail::setForkJoinSpin(previous);
}

// Two threads splitting at once: one holds the pool, the other is refused and falls back to
// oneTBB inside the kernel; both results are right.
TEST(ForkJoin, ConcurrentKernelsOnePoolAndOneTbbBothRight) {
  OpCase c = convCase("concurrent", {1, 16, 64, 64}, {32, 16, 3, 3}, true, {1, 1}, {1, 1, 1, 1},
                      {1, 1}, 1, true);
  const std::vector<Tensor> ins = makeInputs(c);
  const Tensor expected = runReference(c, ins);
  auto spec = compileKernelSpec(makeKernelKey(c.kind, typesOf(ins), c.attrs(), 2));
  std::vector<const void*> ptrs;
  for (const Tensor& t : ins) ptrs.push_back(t.data());
  std::vector<Tensor> outs;
  for (int i = 0; i < 2; ++i) outs.push_back(poisoned(spec->output));
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&, i] {
      for (int r = 0; r < 20; ++r) kernels::run(*spec, ptrs.data(), outs[i].data());
    });
  for (std::thread& t : threads) t.join();
  for (const Tensor& out : outs) expectMatches(c, expected, out);
}

}  // namespace
}  // namespace gearbox
