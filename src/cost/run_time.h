// run_time: what a run costs in time on one GPU, read off the same roofline timeline that `plan`
// uses (cost/cost_model.h): loading the weights over the host link, one step (an inference
// forward, or a training iteration in its steady state), throughput, and a whole run of N samples
// or tokens with its FLOPs. There is no formula here beside the timeline's: a step is
// iteration_time() of the simulated program, its FLOPs are the timeline's count.
//
// Units: a step's samples are the batch; its tokens are the elements of the model's integer input
// (token ids, batch x sequence) when it has one, and throughput is then in tokens/s, else in
// samples/s. Whole runs round the number of steps up (a last, partial batch is a whole step).
//
// Invariants: every time is finite and non-negative; steps >= 1 when a run length is given.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cost/cost_model.h"
#include "cost/price_catalog.h"

namespace headroom {

// Where the weights wait in host memory before model.to("cuda").
enum class HostMemory : uint8_t { Pageable, Pinned };
std::string_view host_memory_name(HostMemory h);

// A whole run: `samples` or `tokens` per epoch (exactly one), `epochs` times.
struct RunLength {
  std::optional<int64_t> samples;
  std::optional<int64_t> tokens;
  int64_t epochs = 1;
};

struct LoadTime {
  int64_t bytes = 0;    // parameters and buffers, tied ones once (Graph::weights_bytes)
  int64_t tensors = 0;  // one copy each
  HostMemory host = HostMemory::Pageable;
  double ms = 0;
};

// The whole run's totals.
struct RunTotals {
  int64_t steps = 0;
  double ms = 0;
  double flops = 0;  // steps x the timeline's FLOPs per step
  // The parameter rule as a cross-check, for token models with every parameter trained (or for
  // inference): 6 x tokens x parameters for training, 2 x tokens x parameters for inference.
  std::optional<double> rule_flops;
  std::string rule;  // "6*N*P" or "2*N*P"
  // The run's price on its GPU (cost/price_catalog.h): the override or the cheapest listing;
  // unset when the GPU has neither.
  std::optional<GpuPrice> price;
  std::optional<double> cost_usd;
};

struct Throughput {
  double value = 0;
  std::string unit;  // "samples/s" or "tokens/s"
};

// Generation (transformers' generate()): the prefill gives the first token; each decode forward
// one more. Decode forwards between the first and the last simulated one are interpolated
// linearly (their work grows linearly with the cache: one more key and value per token).
struct GenerationTime {
  double prefill_ms = 0;       // time to first token
  double first_decode_ms = 0;  // decode 1 (0 without decode forwards)
  double last_decode_ms = 0;   // decode M-1
  double per_token_ms = 0;     // mean decode forward
  double total_ms = 0;         // prefill + every decode
};

// What estimate reports with a catalog GPU.
struct RunTime {
  std::string gpu;
  LoadTime load;
  bool training = false;
  IterationTime step;           // the steady-state training iteration, or the inference forward
  int64_t samples_per_step = 0; // the batch
  int64_t tokens_per_step = 0;  // 0: not a token model
  Throughput throughput;
  std::optional<GenerationTime> generation;
  std::optional<RunTotals> run;
};

// Weights loaded from host memory: every parameter and buffer tensor (tied ones once).
LoadTime load_time(const CostModel& model, const Graph& g, HostMemory host);

// Token ids per sample: the elements per sample of the first integer (I64/I32) input, 0 when the
// model has none (images, features).
int64_t tokens_per_sample(const Graph& g);

// samples (or tokens, when tokens_per_step > 0) per second of a step of `step_ms` (0 for a step
// that takes no time: a model without kernels).
Throughput throughput(int64_t samples_per_step, int64_t tokens_per_step, double step_ms);

// REQUIRES: samples_per_step > 0. InputError: --tokens for a model without token
// ids; a step count past 64 bits.
// `training`: the rule is 6*N*P, else 2*N*P; `all_trainable`: no frozen parameter (else no rule).
RunTotals run_totals(const RunLength& length, int64_t samples_per_step, int64_t tokens_per_step, double step_ms,
                     double step_flops, int64_t parameters, bool training, bool all_trainable);

}  // namespace headroom
