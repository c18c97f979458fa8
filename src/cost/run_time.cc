#include "cost/run_time.h"

#include <cmath>

#include "util/checked.h"
#include "util/error.h"

namespace headroom {

std::string_view host_memory_name(HostMemory h) { return h == HostMemory::Pinned ? "pinned" : "pageable"; }

LoadTime load_time(const CostModel& model, const Graph& g, HostMemory host) {
  LoadTime l;
  l.host = host;
  for (const Tensor& t : g.tensors) {
    if (g.is_weight(t.id) && t.tied_to == kNone) ++l.tensors;
  }
  l.bytes = g.weights_bytes();
  l.ms = model.load_ms(l.bytes, l.tensors, host == HostMemory::Pinned);
  return l;
}

int64_t tokens_per_sample(const Graph& g) {
  for (TensorId id : g.inputs) {
    const Tensor& t = g.tensor(id);
    if ((t.dtype == DType::I64 || t.dtype == DType::I32) && !t.shape.empty() && t.shape[0] > 0) {
      return t.numel() / t.shape[0];
    }
  }
  return 0;
}

Throughput throughput(int64_t samples_per_step, int64_t tokens_per_step, double step_ms) {
  if (!(step_ms > 0)) return {0, tokens_per_step > 0 ? "tokens/s" : "samples/s"};
  if (tokens_per_step > 0) return {static_cast<double>(tokens_per_step) / step_ms * 1e3, "tokens/s"};
  return {static_cast<double>(samples_per_step) / step_ms * 1e3, "samples/s"};
}

RunTotals run_totals(const RunLength& length, int64_t samples_per_step, int64_t tokens_per_step, double step_ms,
                     double step_flops, int64_t parameters, bool training, bool all_trainable) {
  HEADROOM_CHECK(samples_per_step > 0, "a step has samples");
  HEADROOM_CHECK(length.samples.has_value() != length.tokens.has_value(), "a run is samples or tokens");
  int64_t per_epoch = 0;     // steps
  int64_t tokens_epoch = 0;  // tokens per epoch, for the rule
  if (length.tokens) {
    if (tokens_per_step <= 0) throw InputError("--tokens applies to models that take token ids; count this model's run in --samples");
    per_epoch = (*length.tokens + tokens_per_step - 1) / tokens_per_step;
    tokens_epoch = *length.tokens;
  } else {
    per_epoch = (*length.samples + samples_per_step - 1) / samples_per_step;
    if (tokens_per_step > 0) tokens_epoch = checked_mul(*length.samples, tokens_per_step / samples_per_step, "tokens of the run");
  }
  RunTotals r;
  r.steps = checked_mul(per_epoch, length.epochs, "steps of the run (--epochs)");
  r.ms = static_cast<double>(r.steps) * step_ms;
  r.flops = static_cast<double>(r.steps) * step_flops;
  if (tokens_epoch > 0 && (all_trainable || !training)) {
    const double n = static_cast<double>(tokens_epoch) * static_cast<double>(length.epochs);
    r.rule_flops = (training ? 6.0 : 2.0) * n * static_cast<double>(parameters);
    r.rule = training ? "6*N*P" : "2*N*P";
  }
  return r;
}

}  // namespace headroom
