// Geared mode (executor/modes/geared.h).
#include "executor/modes/geared.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "compiler/compile_log.h"
#include "executor/plan_runner.h"
#include "graph/checked.h"
#include "graph/error.h"

namespace gearbox {

std::unique_ptr<ModeStrategy> makeGearedMode(ModeHost& host) {
  return std::make_unique<GearedMode>(host);
}

GearOptions& gearOptions(SessionOptions& o) {
  if (auto* g = std::any_cast<GearOptions>(&o.modeConfig)) return *g;
  return o.modeConfig.emplace<GearOptions>();
}

const GearOptions* findGearOptions(const SessionOptions& o) {
  return std::any_cast<GearOptions>(&o.modeConfig);
}

const char* gearFallbackName(GearFallback f) {
  switch (f) {
    case GearFallback::kError: return "error";
    case GearFallback::kPad: return "pad";
    case GearFallback::kDynamic: return "dynamic";
    case GearFallback::kEager: return "eager";
    case GearFallback::kPadDynamic: return "pad+dynamic";
    case GearFallback::kPadEager: return "pad+eager";
  }
  return "?";
}

bool gearFallbackPads(GearFallback f) {
  return f == GearFallback::kPad || f == GearFallback::kPadDynamic || f == GearFallback::kPadEager;
}

GearFallback gearFallbackPath(GearFallback f) {
  switch (f) {
    case GearFallback::kPadDynamic: return GearFallback::kDynamic;
    case GearFallback::kPadEager: return GearFallback::kEager;
    default: return f;
  }
}

namespace {
constexpr GearFallback kGearFallbacks[] = {GearFallback::kError,      GearFallback::kPad,
                                           GearFallback::kDynamic,    GearFallback::kEager,
                                           GearFallback::kPadDynamic, GearFallback::kPadEager};
// Whether a call no gear serves runs through the dynamic or eager path.
bool hasFallbackPath(GearFallback f) {
  const GearFallback path = gearFallbackPath(f);
  return path == GearFallback::kDynamic || path == GearFallback::kEager;
}
}  // namespace

std::vector<std::string> gearFallbackNames() {
  std::vector<std::string> names;
  for (GearFallback f : kGearFallbacks) names.emplace_back(gearFallbackName(f));
  return names;
}

GearFallback parseGearFallback(std::string_view text) {
  for (GearFallback f : kGearFallbacks)
    if (text == gearFallbackName(f)) return f;
  fail(ErrorKind::kConfig, "--gear-fallback '{}': expected one of {}", text,
       fmt::join(gearFallbackNames(), ", "));
}

const char* gearCompileName(GearCompile c) {
  return c == GearCompile::kLazy ? "lazy" : "eager";
}

GearCompile parseGearCompile(std::string_view text) {
  if (text == "eager") return GearCompile::kEager;
  if (text == "lazy") return GearCompile::kLazy;
  fail(ErrorKind::kConfig, "--gear-compile '{}': expected eager or lazy", text);
}

namespace {

GearedMode& gearedMode(Session& s) {
  auto* geared = dynamic_cast<GearedMode*>(&s.modeStrategy());
  if (!geared)
    fail(ErrorKind::kConfig,
         "set_dim_gears and compileGears need mode geared; this session runs {}",
         modeName(s.options().mode));
  return *geared;
}

int64_t fieldInt(const CallRecord& r, std::string_view name) {
  const ModeField* f = findModeField(r.modeFields, name);
  return f ? std::stoll(f->value) : 0;
}

}  // namespace

void set_dim_gears(Session& s, const std::string& input, const DimGearList& gears) {
  gearedMode(s).setDimGears(input, gears);
}

void compileGears(Session& s, const InputSignature& firstSeen) {
  gearedMode(s);  // the mode check
  s.prepare(firstSeen);
}

const GearSet* gearSet(const Session& s) {
  const auto* geared = dynamic_cast<const GearedMode*>(&s.modeStrategy());
  return geared ? geared->gearSet() : nullptr;
}

std::vector<std::string> gearOptionLines(const Session& s) {
  const auto* geared = dynamic_cast<const GearedMode*>(&s.modeStrategy());
  return geared ? geared->reportLines() : std::vector<std::string>{};
}

GearedCall gearedCall(const CallRecord& r) {
  GearedCall c;
  const ModeField* gear = findModeField(r.modeFields, "gear");
  if (!gear) return c;
  c.gear = static_cast<int>(std::stoll(gear->value));
  const ModeField* padded = findModeField(r.modeFields, "padded");
  c.padded = padded && padded->value == "true";
  c.realElements = fieldInt(r, "real_elements");
  c.paddedElements = fieldInt(r, "padded_elements");
  if (const ModeField* fallback = findModeField(r.modeFields, "gear_fallback"))
    c.fallback = fallback->value;
  return c;
}

GearedCounters gearedCounters(const SessionStats& st) {
  return {st.modeCounter("gears"),          st.modeCounter("padded_calls"),
          st.modeCounter("real_elements"),  st.modeCounter("padded_elements"),
          st.modeCounter("fallback_calls"), st.modeCounter("gears_compiled_on_first_use")};
}

GearedMode::GearedMode(ModeHost& host)
    : host_(host),
      config_(GearConfig::fromGraph(host.graph())),
      // The dynamic fallback leaves dynamic what dynamic mode does (DynamicDimPolicy kDeclared).
      fallbackDims_(DynamicDimPolicy::Start::kDeclared, host.options().dynamicDims,
                    host.options().staticDims) {
  if (const GearOptions* given = host.modeConfig<GearOptions>()) options_ = *given;
  // --pad-to pads every call, so no call is left for another fallback to take.
  if (!options_.padTo.empty() && hasFallbackPath(options_.fallback))
    fail(ErrorKind::kConfig,
         "--pad-to pads every call to one shape; it cannot be combined with --gear-fallback {}",
         gearFallbackName(options_.fallback));
  // Bad gears text fails when the session is built, not at its first call. prepare() applies
  // the text again, after any set_dim_gears calls, so here it goes into a scratch copy.
  if (const std::string& text = options_.json; !text.empty()) {
    GearConfig scratch = config_;
    applyGearsJson(scratch, text);
  }
}

void GearedMode::setDimGears(const std::string& input, const DimGearList& gears) {
  if (set_) fail(ErrorKind::kGear, "gears are already compiled; set_dim_gears must come first");
  config_.setDimGears(input, gears);
}

bool GearedMode::padAllowed() const {
  return gearFallbackPads(options_.fallback) || !options_.padTo.empty();
}

std::vector<ModeCounter> GearedMode::counters() const {
  // Top level: the report keeps these in keys of their own (gears, padded_calls,
  // padding_waste), which predate mode_counters.
  constexpr auto top = ModeReportPlace::kTopLevel;
  std::vector<ModeCounter> c = {{"gears", gears_, top},
                                {"padded_calls", paddedCalls_, top},
                                {"real_elements", realElements_, top},
                                {"padded_elements", paddedElements_, top}};
  // The newer ones, in the mode_counters section, only under the options that make them.
  if (hasFallbackPath(options_.fallback)) c.push_back({"fallback_calls", fallbackCalls_});
  if (options_.compile == GearCompile::kLazy)
    c.push_back({"gears_compiled_on_first_use", lazyCompiles_});
  return c;
}

std::string GearedMode::upFrontSummary() const {
  return fmt::format("{} gears", gears_);
}

void GearedMode::recordCall(CallContext& call, int gear, bool padded, int64_t real,
                            int64_t paddedElems, const char* fallback) {
  using Kind = ModeField::Kind;
  constexpr auto top = ModeReportPlace::kTopLevel;
  CallRecord& rec = call.rec;
  rec.modeFields.reserve(6 + (host_.options().timeline ? 1 : 0));
  rec.modeFields.emplace_back("gear", std::to_string(gear), Kind::kInt, top);
  rec.modeFields.emplace_back("padded", padded ? "true" : "false", Kind::kBool, top);
  rec.modeFields.emplace_back("real_elements", std::to_string(real), Kind::kInt, top);
  rec.modeFields.emplace_back("padded_elements", std::to_string(paddedElems), Kind::kInt, top);
  if (fallback) rec.modeFields.emplace_back("gear_fallback", fallback);
  std::string ran;
  if (fallback && rec.planId)
    ran = fmt::format("not a gear: gear fallback {}, ran plan #{} op by op", fallback, rec.planId);
  else if (fallback)
    ran = fmt::format("not a gear: gear fallback {}, ran op by op", fallback);
  else if (padded)
    ran = fmt::format("padded {} -> {} elements, ran gear {} (plan #{})", real, paddedElems, gear,
                      rec.planId);
  else
    ran = fmt::format("gear {} (plan #{})", gear, rec.planId);
  rec.modeFields.emplace_back("ran", std::move(ran), Kind::kText, ModeReportPlace::kRunLog);
  if (host_.options().timeline)
    rec.modeFields.emplace_back("gear",
                                fallback ? fmt::format("fallback {}", fallback)
                                         : std::to_string(gear) + (padded ? " (padded)" : ""),
                                Kind::kText, ModeReportPlace::kTimeline);
}

const GearSet* GearedMode::gearSet() const {
  return set_ ? &*set_ : nullptr;
}

std::vector<std::string> GearedMode::reportLines() const {
  if (!set_) return {};
  return {"ge.dynamicDims = " + set_->dynamicDimsOption(),
          "ge.dynamicNodeType = " + set_->dynamicNodeTypeOption(),
          "ge.inputShape = " + set_->inputShapeOption()};
}

void GearedMode::prepare(const InputSignature& firstSeen) {
  if (set_) return;
  const Graph& graph = host_.graph();
  // The session's own options are applied once, after any set_dim_gears calls.
  for (const auto& [input, list] : options_.dimGears) config_.setDimGears(input, list);
  if (!options_.json.empty()) applyGearsJson(config_, options_.json);
  for (const auto& [input, shape] : options_.padTo) config_.setPadTo(input, shape);
  FirstSeenShapes seen;
  for (size_t i = 0; i < firstSeen.size() && i < graph.inputs.size(); ++i)
    seen.emplace(graph.values[graph.inputs[i]].name, firstSeen[i]);
  GearSet set = GearSet::build(config_, options_.merge, seen);
  if (padAllowed())
    padding_ = analyzePadding(graph, gearedInputDims(set));  // refuses unsafe graphs now

  // TorchAir logs the options of the concrete graph it compiles.
  const auto& log = compileLogger();
  log->info("Compiling concrete graph {} with options:", graph.name);
  log->info("  ge.dynamicDims = {}", set.dynamicDimsOption());
  log->info("  ge.dynamicNodeType = {}", set.dynamicNodeTypeOption());
  log->info("  ge.inputShape = {}", set.inputShapeOption());

  if (options_.compile == GearCompile::kLazy) {
    // Lazy (vLLM's lazy capture proposal, vllm#20098): the gear list is built and checked,
    // and each gear compiles in the call that first uses it (gearPlan).
    plans_.assign(set.size(), nullptr);
    invalid_.assign(set.size(), "");
    gears_ = static_cast<int64_t>(set.size());
    log->info("{} gears compile on first use (--gear-compile lazy)", set.size());
    set_.emplace(std::move(set));
    return;
  }

  // Every gear is a plan compiled up front, through the host: counted as graph compiles and
  // costed (MODELED) exactly as a plan compiled at a call.
  std::vector<UpFrontCompile> jobs(set.size());
  for (size_t gear = 0; gear < set.size(); ++gear) {
    auto shapes = set.shapes(gear);
    jobs[gear] = {InputSignature(shapes.begin(), shapes.end()),
                  fmt::format("gear {} compiled up front", gear), gear + 1,
                  fmt::format("gear {} compile", gear)};
  }
  UpFrontResult compiled = host_.compileUpFront(jobs, "compile gears up front");
  plans_ = std::move(compiled.plans);
  invalid_ = std::move(compiled.errors);
  const size_t valid = compiled.compiled;
  for (size_t gear = 0; gear < set.size(); ++gear) {
    if (plans_[gear]) continue;
    log->warn(
        "gear {} ({}) cannot be compiled and will never run: {}", gear,
        signatureToString(graph, InputSignature(set.shapes(gear).begin(), set.shapes(gear).end())),
        invalid_[gear]);
  }
  if (valid == 0) fail(ErrorKind::kGear, "no gear can be compiled; gear 0: {}", invalid_.front());
  // One call runs one gear, so the gears share one arena sized for the largest (GE sizes a
  // multi-gear model's feature-map memory by its largest gear the same way): one allocation
  // instead of one per gear.
  host_.bindSharedArena(plans_);
  int kernels = 0;
  for (const auto& p : plans_)
    if (p) kernels += p->kernelsCompiled;
  set_.emplace(std::move(set));
  gears_ = static_cast<int64_t>(valid);
  log->info("Compiled {} of {} gears up front: {} {} compiled", valid, plans_.size(), kernels,
            kernels == 1 ? "kernel" : "kernels");
}

const Plan& GearedMode::gearPlan(size_t gear, const InputSignature& sig, const char* verb,
                                 CallContext& call) {
  const Graph& graph = host_.graph();
  if (!plans_[gear] && invalid_[gear].empty()) {
    // A lazy gear, first used: one graph compile in this call, counted and costed (MODELED)
    // as the up-front compile would have been, and timed in the call's record.
    auto shapes = set_->shapes(gear);
    try {
      plans_[gear] = host_.compile(
          InputSignature(shapes.begin(), shapes.end()),
          fmt::format("gear {} compiled on first use (--gear-compile lazy)", gear), call);
      ++lazyCompiles_;
    } catch (const Error& e) {
      invalid_[gear] = e.what();
    }
    // Resident from now on (MODELED device memory); out of memory is the call's error, not
    // a gear that cannot compile.
    if (plans_[gear]) host_.holdGear(*plans_[gear], gear);
  }
  if (!plans_[gear])
    fail(ErrorKind::kGear, "shapes [{}] {} gear {}, which could not be compiled: {}",
         signatureToString(graph, sig), verb, gear, invalid_[gear]);
  return *plans_[gear];
}

std::vector<Tensor> GearedMode::runFallback(std::span<const Tensor> inputs,
                                            const InputSignature& sig, CallContext& call) {
  using OpKernels = ModeHost::OpKernels;
  std::vector<Tensor> out;
  const GearFallback path = gearFallbackPath(options_.fallback);
  if (path == GearFallback::kEager) {
    // As eager mode: op by op, each new op shape compiling its kernel, one sync at the end.
    out = host_.runOpByOp(host_.graph(), nullptr, inputs, /*syncPerOp=*/false,
                          OpKernels::kEagerCompile, call);
  } else {
    // As dynamic mode: the plan with dynamic dims that accepts the shapes, compiled on the
    // first call outside the gears; run op by op with its shape-generic kernels.
    SessionStats& stats = host_.stats();
    const Plan* plan = nullptr;
    for (const auto& p : fallbackPlans_)
      if (signatureAccepts(p->signature, sig)) plan = p.get();
    if (plan) {
      stats.planCacheHits++;
    } else {
      stats.planCacheMisses++;
      const InputSignature target = fallbackDims_.target(host_.graph(), sig);
      const bool isStatic =
          std::all_of(target.begin(), target.end(), [](const Shape& s) { return s.isStatic(); });
      fallbackPlans_.push_back(host_.compile(
          target,
          isStatic ? "not a gear: gear fallback dynamic, sizes 0 and 1 specialised (a static "
                     "plan, as dynamic mode)"
                   : "not a gear: gear fallback dynamic, one plan with dynamic dims",
          call));
      plan = fallbackPlans_.back().get();
    }
    call.rec.planId = plan->id;
    out = plan->isStatic ? host_.launchStatic(*plan, inputs, call)
                         : host_.runOpByOp(*plan->graph, plan, inputs, host_.syncPerOp(),
                                           OpKernels::kPlan, call);
  }
  recordCall(call, -1, false, 0, 0, gearFallbackName(path));
  ++fallbackCalls_;
  return out;
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

std::vector<Tensor> GearedMode::run(std::span<const Tensor> inputs, const InputSignature& sig,
                                    CallContext& call) {
  CallRecord& rec = call.rec;
  if (!set_) prepare(sig);
  const Graph& graph = host_.graph();
  SessionStats& stats = host_.stats();
  Device& device = host_.device();
  const bool modelOnly = host_.options().modelOnly;
  TimelineSpan lookup = host_.span("gear lookup", "lookup");
  const auto found = set_->find(sig);
  lookup.arg("result", found ? "hit" : "miss");
  lookup.end();
  if (auto gear = found) {
    // A lazy gear's first use compiles it: a miss, as any call that compiles its plan.
    const bool compiles = !plans_[*gear];
    const Plan& plan = gearPlan(*gear, sig, "match", call);
    if (compiles)
      stats.planCacheMisses++;
    else
      stats.planCacheHits++;
    std::vector<Tensor> out = host_.launchStatic(plan, inputs, call);
    recordCall(call, static_cast<int>(*gear), false, 0, 0);
    return out;
  }
  if (options_.fallback == GearFallback::kDynamic || options_.fallback == GearFallback::kEager)
    return runFallback(inputs, sig, call);
  // A padded call is counted in padded_calls, not as a plan-cache miss: a gear served it.
  if (!padAllowed()) {
    stats.planCacheMisses++;
    set_->match(sig);  // throws the explanatory message
  }
  size_t gear = 0;
  if (hasFallbackPath(options_.fallback)) {
    // pad+dynamic, pad+eager: a call no gear covers takes the fallback path (vLLM runs a batch
    // above the largest captured size without the graph).
    const std::optional<size_t> covering = set_->coveringGear(sig);
    if (!covering) return runFallback(inputs, sig, call);
    gear = *covering;
  } else {
    gear = set_->padTarget(sig);  // throws when no gear covers the shapes
  }
  checkRealSizes(graph, *padding_, sig);
  const Plan& plan = gearPlan(gear, sig, "pad up to", call);
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
  if (padBytes > options_.maxPadBytes)
    fail(ErrorKind::kGear,
         "shapes [{}] pad up to gear {} ({}), which needs {} bytes of padded inputs and outputs, "
         "above the pad limit of {} bytes",
         signatureToString(graph, sig), gear,
         signatureToString(graph,
                           InputSignature(set_->shapes(gear).begin(), set_->shapes(gear).end())),
         padBytes, options_.maxPadBytes);
  host_.notePeakBytes(plan.arenaBytes + padBytes);

  // Zero-padded copies of the inputs in pooled device memory.
  std::vector<TensorView> in(inputs.size());
  std::vector<size_t> inBytes(inputs.size(), 0);
  int64_t realElements = 0, paddedElements = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType& t = plan.types[plan.graph->inputs[i]];
    realElements += inputs[i].numel();
    paddedElements += t.shape.numel();
    if (t.shape == inputs[i].shape()) {
      in[i] = inputs[i].view();
      continue;
    }
    inBytes[i] = static_cast<size_t>(t.shape.numel()) * dtypeSize(t.dtype);
    in[i] = TensorView{device.allocate(inBytes[i]), t.dtype, t.shape};
    if (modelOnly) continue;  // unbacked device memory: nothing to fill
    std::memset(in[i].data, 0, inBytes[i]);
    copyBlock(inputs[i].view(), in[i]);
  }
  // Model only: the gear's outputs are never written, so they are not allocated either; the
  // call returns zeros of the real shapes (issue 22: a 2^28-row pad materialised 16.4 GB).
  std::vector<Tensor> padded;
  if (!modelOnly)
    for (ValueId v : plan.graph->outputs)
      padded.push_back(host_.outputTensor(plan.types[v].dtype, plan.types[v].shape));
  std::vector<TensorView> ov(padded.size());
  for (size_t i = 0; i < padded.size(); ++i) ov[i] = padded[i].view();
  // One whole-graph launch and one sync through the host, which costs (MODELED) the gear's
  // kernels at its shapes and the padding waste against the real shapes.
  try {
    host_.launchStaticViews(plan, in, ov, &sig,
                            fmt::format("run gear {} padded (one graph launch + sync)", gear),
                            call);
  } catch (...) {
    for (size_t i = 0; i < in.size(); ++i)
      if (inBytes[i]) device.release(in[i].data, inBytes[i]);
    throw;
  }
  for (size_t i = 0; i < in.size(); ++i)
    if (inBytes[i]) device.release(in[i].data, inBytes[i]);

  // Slice every output back to the real sizes the padding analysis traced.
  std::vector<Tensor> out;
  for (size_t o = 0; o < plan.graph->outputs.size(); ++o) {
    const TensorType& pt = plan.types[plan.graph->outputs[o]];
    Shape real = pt.shape;
    for (const PaddedOutputDim& pd : padding_->outputs[o])
      real[pd.dim] = sig[pd.origin.input][pd.origin.dim] + pd.offset;
    if (modelOnly) {
      // Nothing wrote it: zeros of the real shape, allocated once (issue 22 and 25: a padded
      // model-only call allocated its outputs, an mmap each past 128 KiB).
      out.push_back(unwrittenTensor(pt.dtype, real));
      continue;
    }
    if (real == padded[o].shape()) {
      out.push_back(std::move(padded[o]));
      continue;
    }
    Tensor t = host_.outputTensor(padded[o].dtype(), real);  // the copy writes all of it
    copyBlock(padded[o].view(), t.view());
    out.push_back(std::move(t));
  }
  recordCall(call, static_cast<int>(gear), true, realElements, paddedElements);
  paddedCalls_++;
  realElements_ += realElements;
  paddedElements_ += paddedElements;
  return out;
}

}  // namespace gearbox
