#pragma once
// --check-reference: the reference executor (referenceRun, the oracle of every test) in users'
// hands. Each call's outputs are compared with referenceRun on the same inputs and the
// original graph (as loaded, before the passes), so a bug shared by every mode, or by a pass,
// is caught too.
//
// An element agrees when |out - ref| <= atol + rtol * |ref| (numpy.allclose's rule). The
// defaults are torch.testing.assert_close's for float32 (rtol 1.3e-6, atol 1e-5): the
// optimized kernels sum in another order than the reference loops, so bit-exactness is not
// expected, but a wrong element is far outside. Integer outputs must be equal (torch.testing's
// rule for integer dtypes: rtol = atol = 0).

#include <nlohmann/json.hpp>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "executor/session.h"

namespace gearbox::cli {

struct ReferenceTolerance {
  double rtol = 1.3e-6;
  double atol = 1e-5;
};

// The help of --check-reference, --rtol and --atol (eval's and driver/run_options.def's).
inline constexpr const char* kCheckReferenceHelp =
    "Also run the reference executor on the same inputs and report the max abs/rel error per "
    "output; exit 1 when an element is outside |out - ref| <= atol + rtol * |ref|";
inline constexpr const char* kRtolHelp = "Relative tolerance of --check-reference";
inline constexpr const char* kAtolHelp = "Absolute tolerance of --check-reference";

// The worst disagreement of one output over every call checked.
struct OutputAgreement {
  std::string name;
  double maxAbsError = 0;
  double maxRelError = 0;  // |out - ref| / |ref| over elements with ref != 0
  int64_t mismatches = 0;  // elements outside the tolerance (incl. NaN against a number)
  std::string shapeError;  // set when the shape or dtype differs (first call seen)
  bool ok() const { return mismatches == 0 && shapeError.empty(); }
};

class ReferenceCheck {
 public:
  // `original`: the graph as loaded; copied, so the check outlives the caller's graph.
  ReferenceCheck(Graph original, ReferenceTolerance tol);
  // Runs the reference executor on `inputs` and compares `outputs` with its results.
  void check(std::span<const Tensor> inputs, std::span<const Tensor> outputs);
  // Compares `outputs` with reference results computed before.
  void compare(std::span<const Tensor> reference, std::span<const Tensor> outputs);
  std::vector<Tensor> reference(std::span<const Tensor> inputs) const;

  bool ok() const;
  int64_t calls() const { return calls_; }
  const std::vector<OutputAgreement>& outputs() const { return outputs_; }
  const ReferenceTolerance& tolerance() const { return tol_; }
  // One line per output: "output 'y': max abs error 2.4e-07, max rel error 1.1e-07: ok".
  void print(std::ostream& os, const std::string& indent = "  ") const;
  nlohmann::ordered_json json() const;
  // "output 'y' disagrees with the reference executor: 3 elements outside ..."; empty when ok.
  std::vector<std::string> failures() const;

 private:
  Graph graph_;
  ReferenceTolerance tol_;
  std::vector<OutputAgreement> outputs_;
  int64_t calls_ = 0;
};

}  // namespace gearbox::cli
