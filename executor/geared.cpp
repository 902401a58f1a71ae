// Geared mode: every gear is a static plan compiled up front; a call runs the gear its shapes
// match exactly (an O(1) hash lookup), or -- with the pad fallback -- the smallest gear that
// covers it, with inputs zero-padded and outputs sliced back.
#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include <cstring>

#include "compiler/compile_log.h"
#include "executor/gear_state.h"
#include "executor/plan_runner.h"
#include "executor/session.h"
#include "graph/checked.h"
#include "graph/error.h"

namespace gearbox {

Session::GearState& ensureGearState(std::unique_ptr<Session::GearState>& g, const Graph& graph) {
  if (!g) {
    g = std::make_unique<Session::GearState>();
    g->config = GearConfig::fromGraph(graph);
  }
  return *g;
}

void Session::setDimGears(const std::string& input, const DimGearList& gears) {
  GearState& st = ensureGearState(gears_, *graph_);
  if (st.set) fail(ErrorKind::kGear, "gears are already compiled; set_dim_gears must come first");
  st.config.setDimGears(input, gears);
}

const GearSet* Session::gearSet() const {
  return gears_ && gears_->set ? &*gears_->set : nullptr;
}

std::vector<std::string> Session::gearOptionLines() const {
  const GearSet* set = gearSet();
  if (!set) return {};
  return {"ge.dynamicDims = " + set->dynamicDimsOption(),
          "ge.dynamicNodeType = " + set->dynamicNodeTypeOption(),
          "ge.inputShape = " + set->inputShapeOption()};
}

void Session::compileGears(const InputSignature& firstSeen) {
  GearState& st = ensureGearState(gears_, *graph_);
  if (st.set) return;
  // The session's own options are applied once, after any set_dim_gears calls.
  for (const auto& [input, list] : options_.gears.dimGears) st.config.setDimGears(input, list);
  if (!options_.gears.json.empty()) applyGearsJson(st.config, options_.gears.json);
  FirstSeenShapes seen;
  for (size_t i = 0; i < firstSeen.size() && i < graph_->inputs.size(); ++i)
    seen.emplace(graph_->values[graph_->inputs[i]].name, firstSeen[i]);
  GearSet set = GearSet::build(st.config, options_.gears.merge, seen);
  if (options_.gears.padFallback)
    st.padding = analyzePadding(*graph_, gearedInputDims(set));  // refuses unsafe graphs now

  // TorchAir logs the options of the concrete graph it compiles.
  const auto& log = compileLogger();
  log->info("Compiling concrete graph {} with options:", graph_->name);
  log->info("  ge.dynamicDims = {}", set.dynamicDimsOption());
  log->info("  ge.dynamicNodeType = {}", set.dynamicNodeTypeOption());
  log->info("  ge.inputShape = {}", set.inputShapeOption());

  const auto start = std::chrono::steady_clock::now();
  st.plans.assign(set.size(), nullptr);
  st.invalid.assign(set.size(), "");
  // MODELED device compile cost of each gear's kernels, summed in its own task.
  std::vector<double> modeledKernels(set.size(), 0.0);
  // One task per gear; the kernel cache makes sure a shared op shape compiles once.
  tbb::parallel_for(size_t{0}, set.size(), [&](size_t gear) {
    auto shapes = set.shapes(gear);
    try {
      auto plan = compilePlan(graph_, InputSignature(shapes.begin(), shapes.end()), kernels_,
                              PlanCompileOptions{fmt::format("gear {} compiled up front", gear),
                                                 /*allocateArena=*/false});
      for (const PlanStep& step : plan->steps)
        if (step.compiled)
          modeledKernels[gear] += options_.cost.kernelCompile(opKernelName(step.kernel->key.kind));
      st.plans[gear] = std::move(plan);
    } catch (const Error& e) {
      // A product can combine values the graph rejects (seed 001: (2,2) + (4,2) for an Add).
      st.invalid[gear] = e.what();
    }
  });
  size_t valid = 0;
  for (size_t gear = 0; gear < set.size(); ++gear) {
    if (st.plans[gear]) {
      ++valid;
      continue;
    }
    log->warn("gear {} ({}) cannot be compiled and will never run: {}", gear,
              signatureToString(*graph_,
                                InputSignature(set.shapes(gear).begin(), set.shapes(gear).end())),
              st.invalid[gear]);
  }
  if (valid == 0) fail(ErrorKind::kGear, "no gear can be compiled; gear 0: {}", st.invalid.front());
  // One call runs one gear, so the gears share one arena sized for the largest (GE sizes a
  // multi-gear model's feature-map memory by its largest gear the same way): one allocation
  // instead of one per gear.
  int kernels = 0;
  int64_t arenaBytes = 0;
  for (const auto& p : st.plans) {
    if (!p) continue;
    arenaBytes = std::max(arenaBytes, p->arenaBytes);
    kernels += p->kernelsCompiled;
  }
  auto arena = allocateArena(arenaBytes);
  for (const auto& p : st.plans)
    if (p) bindArena(*p, arena);
  stats_.peakBytes = std::max(stats_.peakBytes, arenaBytes);
  if (arenaBytes > 0) stats_.allocations++;
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  st.set.emplace(std::move(set));
  stats_.gears = static_cast<int64_t>(valid);
  stats_.graphCompiles += static_cast<int64_t>(valid);
  stats_.compileSeconds += secs;
  // MODELED device cost of the up-front compile (serial, as a device compiles).
  double modeled = static_cast<double>(valid) * options_.cost.graphCompileUs;
  for (double us : modeledKernels) modeled += us;
  stats_.modeledDeviceUs += modeled;
  stats_.modeledCompileUs += modeled;
  log->info("Compiled {} of {} gears up front: {} kernels compiled", valid, st.plans.size(),
            kernels);
}

namespace {

// Copies the leading block of `src` (extent = the smaller of the two shapes per dim) into
// `dst`; both contiguous, same rank and dtype. Row-wise memcpy over the last dim.
void copyBlock(const TensorView& src, const TensorView& dst) {
  const int r = src.shape.rank();
  const size_t es = dtypeSize(src.dtype);
  if (r == 0) {
    std::memcpy(dst.data, src.data, es);
    return;
  }
  Shape ext;
  for (int d = 0; d < r; ++d) ext.push(std::min(src.shape[d], dst.shape[d]));
  if (ext.numel() == 0) return;
  const auto ss = contiguousStrides(src.shape), ds = contiguousStrides(dst.shape);
  const int64_t rows = ext.numel() / ext[r - 1];
  const size_t rowBytes = static_cast<size_t>(ext[r - 1]) * es;
  int64_t idx[kMaxRank] = {};
  for (int64_t row = 0; row < rows; ++row) {
    int64_t so = 0, doff = 0;
    for (int d = 0; d < r - 1; ++d) {
      so += idx[d] * ss[d];
      doff += idx[d] * ds[d];
    }
    std::memcpy(static_cast<char*>(dst.data) + doff * es,
                static_cast<const char*>(src.data) + so * es, rowBytes);
    for (int d = r - 2; d >= 0; --d) {
      if (++idx[d] < ext[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace

std::vector<Tensor> Session::runGeared(std::span<const Tensor> inputs, const InputSignature& sig,
                                       CallRecord& rec) {
  if (!gears_ || !gears_->set) compileGears(sig);
  GearState& st = *gears_;
  if (auto gear = st.set->find(sig)) {
    if (!st.plans[*gear])
      fail(ErrorKind::kGear, "shapes [{}] match gear {}, which could not be compiled: {}",
           signatureToString(*graph_, sig), *gear, st.invalid[*gear]);
    stats_.planCacheHits++;
    rec.gear = static_cast<int>(*gear);
    return launchStatic(*st.plans[*gear], inputs, rec);
  }
  stats_.planCacheMisses++;
  if (!options_.gears.padFallback) st.set->match(sig);  // throws the explanatory message
  const size_t gear = st.set->padTarget(sig);           // throws when no gear covers the shapes
  if (!st.plans[gear])
    fail(ErrorKind::kGear, "shapes [{}] pad up to gear {}, which could not be compiled: {}",
         signatureToString(*graph_, sig), gear, st.invalid[gear]);
  checkRealSizes(*graph_, *st.padding, sig);
  const Plan& plan = *st.plans[gear];
  rec.gear = static_cast<int>(gear);
  rec.padded = true;
  rec.planId = plan.id;

  // What this pad allocates (padded inputs and outputs), checked before any of it is: a huge
  // gear must be a clear error, not gigabytes zeroed for a call of a few elements.
  int64_t padBytes = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType& t = plan.types[plan.graph->inputs[i]];
    if (t.shape != inputs[i].shape())
      padBytes = addOrFail(padBytes, checkedBytes(t.shape, t.dtype, "padded input"), "pad bytes");
  }
  for (ValueId v : plan.graph->outputs)
    padBytes = addOrFail(padBytes, checkedBytes(plan.types[v].shape, plan.types[v].dtype, "output"),
                         "pad bytes");
  if (padBytes > options_.gears.maxPadBytes)
    fail(ErrorKind::kGear,
         "shapes [{}] pad up to gear {} ({}), which needs {} bytes of padded inputs and outputs, "
         "above the pad limit of {} bytes",
         signatureToString(*graph_, sig), gear,
         signatureToString(
             *graph_, InputSignature(st.set->shapes(gear).begin(), st.set->shapes(gear).end())),
         padBytes, options_.gears.maxPadBytes);
  stats_.peakBytes = std::max(stats_.peakBytes, plan.arenaBytes + padBytes);

  // Zero-padded copies of the inputs in pooled device memory.
  std::vector<TensorView> in(inputs.size());
  std::vector<size_t> inBytes(inputs.size(), 0);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType& t = plan.types[plan.graph->inputs[i]];
    rec.realElements += inputs[i].numel();
    rec.paddedElements += t.shape.numel();
    if (t.shape == inputs[i].shape()) {
      in[i] = inputs[i].view();
      continue;
    }
    inBytes[i] = static_cast<size_t>(t.shape.numel()) * dtypeSize(t.dtype);
    in[i] = TensorView{device_->allocate(inBytes[i]), t.dtype, t.shape};
    std::memset(in[i].data, 0, inBytes[i]);
    copyBlock(inputs[i].view(), in[i]);
  }
  std::vector<Tensor> padded = allocateOutputs(plan);
  std::vector<TensorView> ov(padded.size());
  for (size_t i = 0; i < padded.size(); ++i) ov[i] = padded[i].view();
  device_->launch([&] { runStaticPlan(plan, in, ov); }, /*graph=*/true);
  try {
    device_->sync();
  } catch (...) {
    for (size_t i = 0; i < in.size(); ++i)
      device_->release(inBytes[i] ? in[i].data : nullptr, inBytes[i]);
    throw;
  }
  for (size_t i = 0; i < in.size(); ++i)
    if (inBytes[i]) device_->release(in[i].data, inBytes[i]);

  // Slice every output back to the real sizes the padding analysis traced.
  std::vector<Tensor> out;
  for (size_t o = 0; o < padded.size(); ++o) {
    Shape real = padded[o].shape();
    for (const PaddedOutputDim& pd : st.padding->outputs[o])
      real[pd.dim] = sig[pd.origin.input][pd.origin.dim];
    if (real == padded[o].shape()) {
      out.push_back(std::move(padded[o]));
      continue;
    }
    Tensor t(padded[o].dtype(), real);
    copyBlock(padded[o].view(), t.view());
    out.push_back(std::move(t));
  }
  stats_.paddedCalls++;
  stats_.realElements += rec.realElements;
  stats_.paddedElements += rec.paddedElements;
  return out;
}

}  // namespace gearbox
