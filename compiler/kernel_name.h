#pragma once
// Kernel names: the one place that formats and parses them. Every name gearbox writes (logs,
// kernel_meta files, op-info records, the recompile report) comes from formatKernelName, and
// parseKernelName reads every one of them back; tests/kernel_name_test.cpp checks the round
// trip for every op in graph/ops.def.
//
// Format:
//   {Op}_{dtype}_{format}_{in0}[__{in1}...][__{attr}]
//   in_i  = its dims joined by '_' ("s" for rank 0; dynamic dims print as -1), then
//           "_{dtype}" when the input's dtype differs from the data dtype (an index input):
//           "IndexSelect_float_ND_4_5__3_int32__dim0";
//   attr  = "dim{d}" (index_select, cat, cat_gather; d wrapped to [0, rank)),
//           "shape{d0}_{d1}..." (reshape; -1 = inferred, -2 = the input's dim at that
//           position), or "perm{p0}_{p1}..." (transpose); then one section per typed
//           attribute that is not its default, "{name}={v0}_{v1}..." for ints and
//           "{name}={v}" for a float: "Conv2d_float_ND_1_3_8_8__4_3_3_3__strides=2_2";
//   then "__threads={n}" for a key compiled under a thread cap (--threads; KernelKey::threads),
//           the last section: "MatMul_float_ND_1_1024__1024_256__threads=1".

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"

namespace gearbox {

// In a reshape key's shape attribute: "this output dim is the input's dim at the same
// position" (a named dim in the IR whose size is not static yet). Prints as -2.
inline constexpr int64_t kCopyInputDim = -2;

// Appends the kernel name for these key fields to `out` (no format-string parsing: this runs
// on every kernel compile).
void appendKernelName(std::string& out, OpKind kind, DType dtype, std::string_view format,
                      std::span<const TensorType> inputs, const Attrs& attrs, int threads = 0);

// A kernel name read back. dtype and format are as written; op is the kernel op name.
struct ParsedKernelName {
  std::string op;
  std::string dtype;
  std::string format;
  std::vector<std::vector<int64_t>> inputs;   // dims per input (-1 = dynamic)
  std::vector<std::string> inputDtypes;       // per input: "" = the data dtype, else e.g. "int64"
  std::optional<int64_t> dim;                 // the `dim` attribute, when present
  std::optional<std::vector<int64_t>> shape;  // reshape's `shape` attribute
  std::optional<std::vector<int64_t>> perm;   // transpose's `perm` attribute
  // Typed attributes other than the defaults, in order: ("strides", "2_2"), ("max", "6").
  std::vector<std::pair<std::string, std::string>> attrs;
  std::optional<int64_t> threads;  // the thread cap, when the name has one
};

// Parses a kernel name; nullopt for names in any other format (e.g. other tools' logs). Accepts
// every name appendKernelName writes; op names outside graph/ops.def are accepted too, so logs
// of older or newer gearbox versions still get their dims analysed.
std::optional<ParsedKernelName> parseKernelName(std::string_view name);

}  // namespace gearbox
