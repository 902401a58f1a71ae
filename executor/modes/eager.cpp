// Eager mode (seed 000): no graph compile. Every op is dispatched on its own -- runtime shape
// inference, an output buffer from the pool, a kernel from the kernel cache, compiled the first
// time its (op, dtype, shapes, attrs) is seen -- and one sync ends the call.
#include "executor/modes/mode_strategy.h"

namespace gearbox {

namespace {

class EagerMode final : public ModeStrategy {
 public:
  explicit EagerMode(ModeHost& host) : host_(host) {}
  std::vector<Tensor> run(std::span<const Tensor> inputs, const InputSignature&,
                          CallContext& call) override {
    return host_.runOpByOp(host_.graph(), nullptr, inputs, /*syncPerOp=*/false,
                           ModeHost::OpKernels::kEagerCompile, call);
  }

 private:
  ModeHost& host_;
};

}  // namespace

std::unique_ptr<ModeStrategy> makeEagerMode(ModeHost& host) {
  return std::make_unique<EagerMode>(host);
}

}  // namespace gearbox
