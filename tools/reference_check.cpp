#include "tools/reference_check.h"

#include <fmt/format.h>

#include <cmath>

#include "graph/error.h"

namespace gearbox::cli {

void addReferenceOptions(CLI::App* cmd, bool& check, ReferenceTolerance& tol) {
  cmd->add_flag("--check-reference", check, kCheckReferenceHelp);
  cmd->add_option("--rtol", tol.rtol, kRtolHelp)
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--atol", tol.atol, kAtolHelp)
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

ReferenceCheck::ReferenceCheck(Graph original, ReferenceTolerance tol)
    : graph_(std::move(original)), tol_(tol) {
  for (ValueId v : graph_.outputs) {
    OutputAgreement o;
    o.name = graph_.values[v].name;
    outputs_.push_back(std::move(o));
  }
}

std::vector<Tensor> ReferenceCheck::reference(std::span<const Tensor> inputs) const {
  return referenceRun(graph_, inputs);
}

void ReferenceCheck::check(std::span<const Tensor> inputs, std::span<const Tensor> outputs) {
  const std::vector<Tensor> ref = reference(inputs);
  compare(ref, outputs);
}

void ReferenceCheck::compare(std::span<const Tensor> reference, std::span<const Tensor> outputs) {
  if (reference.size() != outputs_.size() || outputs.size() != outputs_.size())
    fail(ErrorKind::kShape, "--check-reference: graph {} has {} outputs, the run returned {}",
         graph_.name, outputs_.size(), outputs.size());
  ++calls_;
  for (size_t k = 0; k < outputs.size(); ++k) {
    OutputAgreement& agg = outputs_[k];
    const Tensor& out = outputs[k];
    const Tensor& ref = reference[k];
    if (out.dtype() != ref.dtype() || out.shape() != ref.shape()) {
      if (agg.shapeError.empty())
        agg.shapeError = fmt::format("call {}: got {} {}, the reference executor {} {}", calls_,
                                     dtypeName(out.dtype()), out.shape().toString(),
                                     dtypeName(ref.dtype()), ref.shape().toString());
      continue;
    }
    // Integers have no rounding to forgive.
    const bool exact = out.dtype() != DType::kF32;
    const double rtol = exact ? 0.0 : tol_.rtol, atol = exact ? 0.0 : tol_.atol;
    dispatchDType(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* po = out.as<T>();
      const T* pr = ref.as<T>();
      for (int64_t i = 0; i < out.numel(); ++i) {
        const double a = static_cast<double>(po[i]), r = static_cast<double>(pr[i]);
        if (std::isnan(a) || std::isnan(r)) {
          // NaN agrees only with NaN (numpy.allclose with equal_nan=True).
          if (std::isnan(a) != std::isnan(r)) {
            agg.mismatches++;
            agg.maxAbsError = INFINITY;
          }
          continue;
        }
        const double err = a == r ? 0.0 : std::fabs(a - r);  // equal infinities agree
        agg.maxAbsError = std::max(agg.maxAbsError, err);
        if (r != 0) agg.maxRelError = std::max(agg.maxRelError, err / std::fabs(r));
        if (!(err <= atol + rtol * std::fabs(r))) agg.mismatches++;
      }
    });
  }
}

bool ReferenceCheck::ok() const {
  for (const OutputAgreement& o : outputs_)
    if (!o.ok()) return false;
  return true;
}

void ReferenceCheck::print(std::ostream& os, const std::string& indent) const {
  for (const OutputAgreement& o : outputs_) {
    if (!o.shapeError.empty()) {
      os << fmt::format("{}output '{}': shape or dtype differs ({}): FAIL\n", indent, o.name,
                        o.shapeError);
      continue;
    }
    os << fmt::format("{}output '{}': max abs error {:.3g}, max rel error {:.3g}: {}\n", indent,
                      o.name, o.maxAbsError, o.maxRelError,
                      o.ok() ? "ok" : fmt::format("FAIL ({} elements outside)", o.mismatches));
  }
}

nlohmann::ordered_json ReferenceCheck::json() const {
  nlohmann::ordered_json j;
  j["rtol"] = tol_.rtol;
  j["atol"] = tol_.atol;
  j["calls"] = calls_;
  j["ok"] = ok();
  auto& outs = j["outputs"] = nlohmann::ordered_json::array();
  for (const OutputAgreement& o : outputs_) {
    nlohmann::ordered_json e;
    e["name"] = o.name;
    // JSON has no infinity: a NaN against a number is reported as null.
    e["max_abs_error"] = std::isfinite(o.maxAbsError) ? nlohmann::ordered_json(o.maxAbsError)
                                                      : nlohmann::ordered_json();
    e["max_rel_error"] = std::isfinite(o.maxRelError) ? nlohmann::ordered_json(o.maxRelError)
                                                      : nlohmann::ordered_json();
    e["mismatches"] = o.mismatches;
    if (!o.shapeError.empty()) e["shape_error"] = o.shapeError;
    e["ok"] = o.ok();
    outs.push_back(std::move(e));
  }
  return j;
}

std::vector<std::string> ReferenceCheck::failures() const {
  std::vector<std::string> out;
  for (const OutputAgreement& o : outputs_) {
    if (o.ok()) continue;
    out.push_back(
        o.shapeError.empty()
            ? fmt::format("output '{}' disagrees with the reference executor: {} elements outside "
                          "|out - ref| <= {} + {} * |ref| (max abs error {:.3g}, max rel error "
                          "{:.3g})",
                          o.name, o.mismatches, tol_.atol, tol_.rtol, o.maxAbsError, o.maxRelError)
            : fmt::format("output '{}' disagrees with the reference executor: {}", o.name,
                          o.shapeError));
  }
  return out;
}

}  // namespace gearbox::cli
