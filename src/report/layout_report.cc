#include "report/layout_report.h"

#include <fmt/format.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "util/format.h"

namespace headroom {
namespace {

// The table's mark of a layout's recompute.
const char* recompute_mark(Recompute r) {
  return r == Recompute::Full ? " + ckpt" : r == Recompute::Selective ? " + sel" : "";
}

}  // namespace

std::string layout_text(const LayoutPlan& p) {
  std::string s = fmt::format("headroom plan: {} on {} x {}, global batch {} ({} per GPU), training ({}), {}\n", p.model,
                              p.gpus, p.gpu, p.global_batch, p.batch_per_gpu, optimizer_name(p.run.optimizer),
                              precision_name(p.run.precision));
  s += fmt::format("links: {}; budget {} per GPU\n\n", p.link.description, human_bytes(p.budget_bytes));
  if (p.ranked.empty()) {
    s += "No layout fits.\n";
  } else {
    s += fmt::format("{:>4}  {:<33} {:>13} {:>10} {:>11} {:>11} {:>11} {:>11}\n", "rank", "layout", "micro x accum",
                     "per GPU", "compute", "comm", "step", "samples/s");
    int rank = 0;
    for (const LayoutOption& o : p.ranked) {
      s += fmt::format("{:>4}  {:<33} {:>13} {:>10} {:>8.1f} ms {:>8.1f} ms {:>8.1f} ms {:>11.1f}\n", ++rank,
                       o.engine + recompute_mark(o.recompute),
                       fmt::format("{} x {}", o.micro_batch, o.micro_batches), human_bytes(o.peak_bytes), o.compute_ms,
                       o.comm.ms + o.tensor_comm.ms + o.pipeline.p2p_ms, o.step_ms, o.samples_per_s);
    }
  }
  for (const LayoutRejection& r : p.rejected) s += fmt::format("does not fit: {}: {}\n", r.engine, r.why);
  s += fmt::format("\nstep = compute (recompute and the optimizer step included) + the data-parallel communication the backward cannot hide + the tensor-parallel all-reduces + a pipeline's bubble and p2p sends{}; {} simulations.\n",
                   std::any_of(p.ranked.begin(), p.ranked.end(), [](const LayoutOption& o) { return o.offload_bytes > 0; })
                       ? " + host-link copies of offloading (an offload family's optimizer step runs on the host CPU, in compute)"
                       : "",
                   p.evaluations);
  if (std::any_of(p.ranked.begin(), p.ranked.end(), [](const LayoutOption& o) { return o.recompute == Recompute::Full; })) {
    s += "+ ckpt: every transformer block checkpointed (model.gradient_checkpointing_enable(); Megatron's --recompute-granularity full; estimate --checkpoint blocks).\n";
  }
  if (std::any_of(p.ranked.begin(), p.ranked.end(), [](const LayoutOption& o) { return o.recompute == Recompute::Selective; })) {
    s += "+ sel: each block's attention core recomputed (Megatron's --recompute-granularity selective; estimate --checkpoint attention).\n";
  }
  if (std::any_of(p.ranked.begin(), p.ranked.end(), [](const LayoutOption& o) { return o.parallel.sequence_parallel || o.parallel.virtual_stages; })) {
    s += "+ SP: Megatron sequence parallelism (--sequence-parallel); PP P (v V): the interleaved schedule with V model chunks per rank.\n";
  }
  if (!p.ranked.empty()) {
    const LayoutOption& best = p.ranked.front();
    std::string flags = best.parallel.tensor_parallel > 1 ? fmt::format(" --tensor-parallel {}", best.parallel.tensor_parallel) : "";
    if (best.parallel.sequence_parallel) flags += " --sequence-parallel";
    if (best.parallel.megatron) flags += " --megatron";
    if (best.parallel.pipeline_parallel > 1) flags += fmt::format(" --pipeline-parallel {}", best.parallel.pipeline_parallel);
    if (best.parallel.virtual_stages) flags += fmt::format(" --pipeline-schedule interleaved --virtual-stages {}", *best.parallel.virtual_stages);
    flags += best.parallel.zero_stage ? fmt::format(" --zero {}", *best.parallel.zero_stage)
                        : best.parallel.fsdp     ? std::string(" --fsdp ") + (*best.parallel.fsdp == FsdpStrategy::Full ? "full" : "grad-op")
                                                 : "";
    if (best.parallel.offload_optimizer) flags += " --offload-optimizer cpu";
    if (best.parallel.offload_params) flags += " --offload-params cpu";
    if (best.recompute == Recompute::Full) flags += " --checkpoint blocks";
    if (best.recompute == Recompute::Selective) flags += " --checkpoint attention";
    std::string accum = best.micro_batches > 1 || best.parallel.pipeline_parallel > 1
                            ? fmt::format(" --micro-batch {} --grad-accum {}", best.micro_batch, best.micro_batches)
                            : fmt::format(" --batch {}", rank_batch(p, best.parallel.tensor_parallel));
    s += fmt::format("The per-GPU estimate of the first: headroom estimate {} --gpu {} --gpus {}{}{}\n", p.model, p.gpu, p.gpus,
                     flags, accum);
  }
  return s;
}

std::string layout_json(const LayoutPlan& p) {
  nlohmann::ordered_json j;
  j["model"] = p.model;
  j["gpu"] = p.gpu;
  j["gpus"] = p.gpus;
  j["global_batch"] = p.global_batch;
  j["batch_per_gpu"] = p.batch_per_gpu;
  j["budget_bytes"] = p.budget_bytes;
  j["links"] = {{"description", p.link.description},
                {"intra_node_bytes_per_s", p.link.intra_node_bytes_per_s},
                {"inter_node_bytes_per_s", p.link.inter_node_bytes_per_s},
                {"gpus_per_node", p.link.gpus_per_node}};
  nlohmann::ordered_json ranked = nlohmann::ordered_json::array();
  for (const LayoutOption& o : p.ranked) {
    ranked.push_back({{"layout", o.engine},
                      {"tensor_parallel", o.parallel.tensor_parallel},
                      {"pipeline_parallel", o.parallel.pipeline_parallel},
                      {"data_parallel", p.gpus / (o.parallel.tensor_parallel * o.parallel.pipeline_parallel)},
                      {"micro_batch", o.micro_batch},
                      {"grad_accum", o.micro_batches},
                      {"peak_bytes", o.peak_bytes},
                      {"compute_ms", o.compute_ms},
                      {"optimizer_ms", o.optimizer_ms},
                      {"comm_bytes_per_gpu", o.comm.bytes_per_gpu},
                      {"comm_ms", o.comm.ms},
                      {"exposed_comm_ms", o.exposed_comm_ms},
                      {"tensor_parallel_comm_bytes_per_gpu", o.tensor_comm.bytes_per_gpu},
                      {"tensor_parallel_comm_ms", o.tensor_comm.ms},
                      {"pipeline_bubble_ms", o.pipeline.bubble_ms},
                      {"pipeline_p2p_bytes_per_gpu", o.pipeline.p2p_bytes},
                      {"pipeline_p2p_ms", o.pipeline.p2p_ms},
                      {"sequence_parallel", o.parallel.sequence_parallel},
                      {"pipeline_schedule", o.parallel.pipeline_parallel > 1 ? std::string(pipeline_schedule_name(o.parallel.schedule())) : std::string()},
                      {"virtual_stages", o.parallel.virtual_stages.value_or(1)},
                      {"activation_checkpointing", o.checkpointed},
                      {"recompute", o.recompute == Recompute::Full ? "full" : o.recompute == Recompute::Selective ? "selective" : "none"},
                      {"offload_bytes_per_gpu", o.offload_bytes},
                      {"offload_ms", o.offload_ms},
                      {"step_ms", o.step_ms},
                      {"samples_per_s", o.samples_per_s}});
  }
  j["ranked"] = ranked;
  nlohmann::ordered_json rejected = nlohmann::ordered_json::array();
  for (const LayoutRejection& r : p.rejected) rejected.push_back({{"layout", r.engine}, {"why", r.why}});
  j["rejected"] = rejected;
  j["evaluations"] = p.evaluations;
  return j.dump(2) + "\n";
}

}  // namespace headroom
