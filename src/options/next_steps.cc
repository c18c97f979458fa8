#include "options/next_steps.h"

#include <fmt/format.h>

#include <optional>
#include <string>

#include "estimate/estimate.h"
#include "plan/planner.h"
#include "sim/device_catalog.h"

namespace headroom {
namespace {

// A changed run at the size that did not fit; nullopt when the model rejects the change.
std::optional<Estimate> try_estimate(const RunArgs& r) {
  Result<EstimateOptions> o = to_estimate_options(r, RunCommand::Estimate);
  if (!o.ok()) return std::nullopt;
  Result<Estimate> e = estimate(o.value());
  if (!e.ok() || !e.value().device) return std::nullopt;
  return e.value();
}

void add_estimated(std::vector<NextStep>& steps, const RunArgs& r, std::string what, std::string change,
                   std::string note) {
  std::optional<Estimate> e = try_estimate(r);
  if (!e) return;
  steps.push_back({std::move(what), std::move(change), e->device->fits, e->device->device_total_bytes, std::move(note)});
}

// The planner under the GPU's usable memory: the fastest feasible plan, or the smallest peak
// any strategy reached.
// `options`: the changed options ("" for the user's own), shown before the plan.
void add_plan(std::vector<NextStep>& steps, const RunArgs& r, std::string what, const std::string& options) {
  Result<EstimateOptions> o = to_estimate_options(r, RunCommand::Estimate);
  if (!o.ok() || o.value().parallel.given()) return;
  PlanRequest req;
  req.run = o.value();
  Result<Plan> p = make_plan(req);
  if (!p.ok()) return;
  const Plan& plan = p.value();
  const std::string change = "headroom plan" + (options.empty() ? " (same options)" : " " + options);
  if (plan.feasible && plan.strategy == "none") {
    steps.push_back({std::move(what), options, true, plan.chosen.eval.peak_bytes, "fits as is, no plan needed"});
  } else if (plan.feasible) {
    const double base = plan.baseline.time.total_ms;
    const double slower = base > 0 ? 100.0 * (plan.chosen.eval.time.total_ms / base - 1.0) : 0.0;
    std::string note = plan.strategy;
    if (!plan.chosen.note.empty()) note += " (" + plan.chosen.note + ")";
    note += fmt::format(", {:+.0f}% step time", slower);
    steps.push_back({std::move(what), change, true, plan.chosen.eval.peak_bytes, note});
  } else if (plan.smallest_peak_bytes > 0) {
    steps.push_back({std::move(what), change, false, plan.smallest_peak_bytes,
                     "smallest with " + plan.smallest_peak_strategy});
  }
}

bool is_adam(const std::string& optimizer) { return optimizer == "adam" || optimizer == "adamw"; }

}  // namespace

std::vector<NextStep> next_steps(const RunArgs& run, FitAxis axis, int64_t value) {
  RunArgs base = run;
  // Each next step is an estimate of a changed run: fit's ranking options are not estimate's.
  base.objective.reset();
  base.prices.clear();
  if (axis == FitAxis::Batch) {
    base.batch = std::to_string(value);
    base.batch_given = true;
  } else {
    base.seq = std::to_string(value);
  }
  const bool training = base.mode == "train";
  const GpuSpec* spec = DeviceCatalog::builtin().try_find(base.gpu);
  const bool bf16 = spec == nullptr || spec->bf16_flops.has_value();
  std::vector<NextStep> steps;

  // Lower precision. Mixed precision keeps fp32 weights and optimizer states, so it saves
  // activations; half-precision inference halves the weights.
  // The precision as resolved (a Hugging Face config's torch_dtype when --precision is not given).
  Result<EstimateOptions> resolved = to_estimate_options(base, RunCommand::Estimate);
  if (!resolved.ok()) return {};
  RunArgs lower = base;
  if (resolved.value().precision == Precision::Fp32) {
    lower.precision = training ? (bf16 ? "amp-bf16" : "amp-fp16") : (bf16 ? "bf16" : "fp16");
    lower.precision_given = true;
    add_estimated(steps, lower, training ? "mixed precision" : "half precision", "--precision " + lower.precision,
                  training ? "numerics change (autocast)" : "weights in 16 bits");
  }
  RunArgs eight_bit = base;
  if (training && is_adam(base.optimizer) && !base.lora) {
    eight_bit.optimizer = "adamw8bit";
    eight_bit.optimizer_given = true;
    add_estimated(steps, eight_bit, "8-bit optimizer", "--optimizer adamw8bit", "bitsandbytes, 2 bytes of state per parameter");
  }
  if (training && !base.lora) {
    RunArgs lora = base;
    lora.lora = "r=16,alpha=32,targets=q_proj,v_proj";
    add_estimated(steps, lora, "LoRA", "--lora " + *lora.lora, "trains adapters only, base frozen");
    if (!base.weights) {
      lora.weights = "nf4";
      add_estimated(steps, lora, "QLoRA", "--weights nf4 --lora " + *lora.lora, "4-bit frozen base (bitsandbytes)");
    }
  }
  if (!training && !base.weights) {
    for (const char* format : {"int8", "nf4"}) {
      RunArgs quantized = base;
      quantized.weights = format;
      add_estimated(steps, quantized, "quantized weights", std::string("--weights ") + format,
                    "bitsandbytes storage of the decoder layers' linears");
    }
  }
  if (training) add_plan(steps, base, "a plan", "");

  // Nothing alone is enough on one GPU: the changes that keep the model (precision, optimizer)
  // together, then the planner on top.
  bool any_fits = false;
  for (const NextStep& s : steps) any_fits = any_fits || s.fits;
  if (training && !any_fits && (lower.precision != base.precision || eight_bit.optimizer != base.optimizer)) {
    RunArgs both = base;
    std::string change;
    if (lower.precision != base.precision) {
      both.precision = lower.precision;
      both.precision_given = true;
      change += "--precision " + both.precision;
    }
    if (eight_bit.optimizer != base.optimizer && try_estimate(eight_bit)) {
      both.optimizer = eight_bit.optimizer;
      both.optimizer_given = true;
      change += (change.empty() ? "" : " ") + std::string("--optimizer ") + both.optimizer;
    }
    add_plan(steps, both, "all of these and a plan", change);
  }

  // More GPUs: the smallest power of two up to 64 that fits, ZeRO-3 for training, tensor
  // parallelism for inference (the models that have it).
  if (!base.gpus) {
    std::optional<NextStep> last;
    for (int64_t n = 2; n <= 64; n *= 2) {
      RunArgs more = base;
      more.gpus = std::to_string(n);
      std::string change = "--gpus " + *more.gpus;
      if (training) {
        more.zero = "3";
        change += " --zero 3";
      } else {
        more.tensor_parallel = *more.gpus;
        change += " --tensor-parallel " + *more.gpus;
      }
      std::optional<Estimate> e = try_estimate(more);
      if (!e) break;
      last = NextStep{fmt::format("{} GPUs", n), change, e->device->fits, e->device->device_total_bytes, "per GPU"};
      if (last->fits) break;
    }
    if (last) steps.push_back(*last);
  }
  // A step that does not fit is listed only if it brings the run closer (ZeRO's buckets, for
  // one, can cost a small model more than they save).
  std::optional<Estimate> as_is = try_estimate(base);
  if (as_is) {
    std::erase_if(steps, [&](const NextStep& n) { return !n.fits && n.device_total_bytes >= as_is->device->device_total_bytes; });
  }
  return steps;
}

std::vector<NextStep> next_steps_if_nothing_fits(const RunArgs& run, const std::vector<FitResult>& results) {
  const FitResult* largest = nullptr;
  for (const FitResult& r : results) {
    if (r.max_value > 0) return {};
    if (r.next && (!largest || r.next->device.capacity_bytes > largest->next->device.capacity_bytes)) largest = &r;
  }
  if (!largest) return {};
  RunArgs one = run;
  if (one.gpu == "all") one.gpu = largest->gpu;
  return next_steps(one, largest->axis, largest->next->value);
}

}  // namespace headroom
