#include "report/estimate_report.h"

#include <fmt/format.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "util/format.h"
#include "report/palette.h"

namespace headroom {
namespace {

std::string mode_name(const EstimateOptions& o) {
  if (o.generation) return "generate";
  return o.mode == RunMode::Training ? "train" : "infer";
}

std::string bar(int64_t part, int64_t total, int width) {
  if (total <= 0) return "";
  int n = static_cast<int>(static_cast<double>(part) * width / static_cast<double>(total) + 0.5);
  std::string s;
  for (int i = 0; i < n; ++i) s += "█";
  return s;
}

// The bar in the category's colour (24-bit ANSI, the HTML report's palette) when `color`.
std::string category_bar(Category c, int64_t part, int64_t total, int width, bool color) {
  std::string b = bar(part, total, width);
  if (!color || b.empty()) return b;
  const Rgb& rgb = category_color(c);
  return fmt::format("\033[38;2;{};{};{}m{}\033[0m", rgb.r, rgb.g, rgb.b, b);
}

std::string optimizer_desc(const Estimate& e) {
  return fmt::format("{}, {}", optimizer_name(e.options.optimizer), e.foreach ? "foreach" : "single-tensor");
}

}  // namespace

namespace {

std::string rate_text(const Throughput& t) {
  if (t.value >= 100) return with_commas(static_cast<int64_t>(std::llround(t.value))) + " " + t.unit;
  return fmt::format("{:.3g} {}", t.value, t.unit);
}

}  // namespace

std::string time_text(const RunTime& t) {
  std::string s = fmt::format("\ntime on {} (roofline, docs/performance.md): load {} ({} weights, {})", t.gpu,
                              human_duration_ms(t.load.ms), human_bytes(t.load.bytes), host_memory_name(t.load.host));
  if (t.generation) {
    const GenerationTime& g = *t.generation;
    s += fmt::format(", generate {}, first token {}, {} per token, {}\n", human_duration_ms(g.total_ms),
                     human_duration_ms(g.prefill_ms), human_duration_ms(g.per_token_ms), rate_text(t.throughput));
  } else {
    s += fmt::format(", {} {}, {}\n", t.training ? "step" : "forward", human_duration_ms(t.step.total_ms), rate_text(t.throughput));
  }
  if (t.run) {
    const RunTotals& r = *t.run;
    s += fmt::format("whole run: {} steps, {}, {:.3g} FLOP", with_commas(r.steps), human_duration_ms(r.ms), r.flops);
    if (r.rule_flops) s += fmt::format(" ({}: {:.3g})", r.rule, *r.rule_flops);
    if (r.cost_usd) {
      s += fmt::format(", ${:.3g} at ${:.2f}/h ({}{})", *r.cost_usd, r.price->usd_per_hour, r.price->provider,
                       r.price->date.empty() ? "" : ", " + r.price->date);
    }
    s += "\n";
  }
  return s;
}

nlohmann::ordered_json time_json(const RunTime& t) {
  nlohmann::ordered_json j;
  j["gpu"] = t.gpu;
  j["model"] = "roofline";
  j["load"] = {{"bytes", t.load.bytes}, {"tensors", t.load.tensors}, {"host_memory", std::string(host_memory_name(t.load.host))},
               {"ms", t.load.ms}};
  j["step"] = {{"compute_ms", t.step.compute_ms}, {"recompute_ms", t.step.recompute_ms}, {"optimizer_ms", t.step.optimizer_ms},
               {"stall_ms", t.step.stall_ms}, {"total_ms", t.step.total_ms}, {"flops", t.step.flops}};
  j["samples_per_step"] = t.samples_per_step;
  j["tokens_per_step"] = t.tokens_per_step;
  if (t.generation) {
    const GenerationTime& g = *t.generation;
    j["generation"] = {{"time_to_first_token_ms", g.prefill_ms}, {"per_token_ms", g.per_token_ms},
                       {"first_decode_ms", g.first_decode_ms}, {"last_decode_ms", g.last_decode_ms}, {"total_ms", g.total_ms}};
  }
  if (t.run) {
    const RunTotals& r = *t.run;
    nlohmann::ordered_json run = {{"steps", r.steps}, {"ms", r.ms}, {"flops", r.flops}};
    if (r.rule_flops) run["rule"] = {{"formula", r.rule}, {"flops", *r.rule_flops}};
    if (r.cost_usd) {
      run["cost"] = {{"usd", *r.cost_usd}, {"usd_per_hour", r.price->usd_per_hour}, {"provider", r.price->provider},
                     {"date", r.price->date}, {"source", r.price->source}};
    }
    j["run"] = run;
  }
  return j;
}

std::string estimate_text(const Estimate& e, bool color) {
  const EstimateOptions& o = e.options;
  const char* bold = color ? "\033[1m" : "";
  const char* reset = color ? "\033[0m" : "";
  std::string s;
  s += fmt::format("{}headroom estimate{}: {}, batch {}", bold, reset, o.model, o.batch);
  if (o.seq) s += fmt::format(", seq {}", *o.seq);
  if (o.mode == RunMode::Training) {
    s += fmt::format(", training ({})", optimizer_desc(e));
    if (e.micro_batches > 1) s += fmt::format(", micro-batch {} x {}", e.micro_batch, e.micro_batches);
  } else if (o.generation) {
    s += fmt::format(", generation (prompt {}, {} new tokens", o.generation->prompt, o.generation->new_tokens);
    if (o.generation->beams > 1) s += fmt::format(", {} beams", o.generation->beams);
    s += ")";
  } else {
    s += ", inference";
  }
  s += fmt::format(", {}, device {}\n", precision_name(o.precision), o.device);
  s += fmt::format("parameters {}", with_commas(e.parameter_count));
  if (e.trainable_parameter_count != e.parameter_count) s += fmt::format(" ({} trainable)", with_commas(e.trainable_parameter_count));
  s += fmt::format(" | weights {} | inputs {} | {} ops\n", human_bytes(e.weights_bytes), human_bytes(e.input_bytes), e.op_count);
  if (e.per_gpu) {
    const PerGpu& g = *e.per_gpu;
    s += fmt::format("per GPU, {}: model states {} ({} bytes), the rest below is one rank's\n", g.layout,
                     human_bytes(g.model_states_bytes), with_commas(g.model_states_bytes));
    if (g.host_bytes > 0 || g.nvme_bytes > 0) {
      s += fmt::format("offloaded per rank: host memory {} ({} bytes)", human_bytes(g.host_bytes), with_commas(g.host_bytes));
      if (g.nvme_bytes > 0) s += fmt::format(", NVMe {} ({} bytes)", human_bytes(g.nvme_bytes), with_commas(g.nvme_bytes));
      s += "\n";
    }
    if (g.stage_peak_bytes.size() > 1) {
      s += "pipeline stages' peaks:";
      for (size_t i = 0; i < g.stage_peak_bytes.size(); ++i) s += fmt::format(" {} {}", i, human_bytes(g.stage_peak_bytes[i]));
      s += "\n";
    }
  }
  s += "\n";
  s += fmt::format("{}peak {}{} ({} bytes) in {}", bold, human_bytes(e.peak_bytes), reset,
                   with_commas(e.peak_bytes), phase_name(e.peak_phase));
  if (e.peak_iteration > 0) s += fmt::format(" of step {}", e.peak_iteration);
  if (o.generation) s += fmt::format(" ({})", forward_name(e.peak_forward));
  s += fmt::format(", at '{}'\n", e.peak_op);
  if (o.generation) s += fmt::format("KV cache at the peak {} ({} bytes)\n", human_bytes(e.kv_cache_bytes), with_commas(e.kv_cache_bytes));
  for (const IterationSummary& it : e.iterations) {
    s += fmt::format("  step {}: peak {} in {} at '{}'  (", it.iteration, human_bytes(it.peak_bytes),
                     phase_name(it.peak_phase), it.peak_op);
    for (size_t i = 0; i < it.phases.size(); ++i) {
      s += fmt::format("{}{} {}", i ? ", " : "", phase_name(it.phases[i].phase), human_bytes(it.phases[i].bytes));
    }
    s += ")\n";
  }
  s += "\nbreakdown at the peak\n";
  for (size_t c = 0; c < kCategoryCount; ++c) {
    int64_t v = e.breakdown_at_peak[c];
    if (v == 0) continue;
    s += fmt::format("  {:<22} {:>10}  {:>6}  {}\n", category_name(static_cast<Category>(c)), human_bytes(v),
                     percent(v, e.peak_bytes), category_bar(static_cast<Category>(c), v, e.peak_bytes, 30, color));
  }
  if (!e.largest_at_peak.empty()) {
    s += "\nlargest buffers alive at the peak\n";
    for (const BufferAtPeak& b : e.largest_at_peak) {
      s += fmt::format("  {:>10}  {:<20} {}\n", human_bytes(b.bytes), category_name(b.category), b.name);
    }
  }
  if (e.device) s += device_text(*e.device, color);
  if (e.time) s += time_text(*e.time);
  for (const std::string& n : e.notes) s += "\nnote: " + n + "\n";
  return s;
}

std::string device_text(const DeviceMemory& d, bool color) {
  const char* green = color ? "\033[32m" : "";
  const char* red = color ? "\033[31m" : "";
  const char* reset = color ? "\033[0m" : "";
  std::string s = fmt::format("\non {} ({} of device memory)\n", d.gpu, human_bytes(d.capacity_bytes));
  s += fmt::format("  {:<34} {:>10}\n", "CUDA context", human_bytes(d.context_bytes));
  if (d.nccl_bytes) s += fmt::format("  {:<34} {:>10}\n", "NCCL communicators", human_bytes(d.nccl_bytes));
  s += fmt::format("  {:<34} {:>10}\n", "allocated peak (512-byte blocks)", human_bytes(d.allocated_peak_bytes));
  s += fmt::format("  {:<34} {:>10}  (+{} over the allocated peak)\n", "reserved peak (caching allocator)",
                   human_bytes(d.reserved_peak_bytes), human_bytes(d.reserved_peak_bytes - d.allocated_peak_bytes));
  s += fmt::format("  {:<34} {:>10}\n", "device total (what nvidia-smi shows)", human_bytes(d.device_total_bytes));
  if (d.usable_bytes != d.capacity_bytes) {
    const double margin = 1.0 - static_cast<double>(d.usable_bytes) / static_cast<double>(d.capacity_bytes);
    s += fmt::format("  {:<34} {:>10}  (kept free: fragmentation drift over long runs, other processes, library growth; --margin 0% turns it off)\n",
                     fmt::format("usable with a {:.0f}% margin", 100.0 * margin), human_bytes(d.usable_bytes));
  }
  if (d.fits) {
    s += fmt::format("  {}fits{}, {} left\n", green, reset, human_bytes(d.headroom_bytes));
  } else {
    s += fmt::format("  {}does not fit{}: {} short{}\n", red, reset, human_bytes(-d.headroom_bytes),
                     d.allocator_oom ? " (the caching allocator runs out of memory)" : "");
  }
  return s;
}

void device_json(const DeviceMemory& d, nlohmann::ordered_json& j) {
  j["gpu"] = d.gpu;
  j["gpu_memory_bytes"] = d.capacity_bytes;
  j["cuda_context_bytes"] = d.context_bytes;
  j["nccl_bytes"] = d.nccl_bytes;
  j["allocated_peak_bytes"] = d.allocated_peak_bytes;
  j["reserved_peak_bytes"] = d.reserved_peak_bytes;
  j["fragmentation_bytes"] = d.fragmentation_bytes;
  j["device_total_bytes"] = d.device_total_bytes;
  j["usable_bytes"] = d.usable_bytes;
  j["fits"] = d.fits;
  j["headroom_bytes"] = d.headroom_bytes;
}

std::string estimate_json(const Estimate& e) {
  const EstimateOptions& o = e.options;
  nlohmann::ordered_json j;
  j["model"] = o.model;
  j["batch"] = o.batch;
  if (o.seq) j["seq"] = *o.seq;
  j["mode"] = mode_name(o);
  if (o.generation) {
    j["prompt"] = o.generation->prompt;
    j["new_tokens"] = o.generation->new_tokens;
    j["beams"] = o.generation->beams;
    j["cache"] = o.generation->static_cache ? "static" : "dynamic";
  }
  j["optimizer"] = o.mode == RunMode::Training ? nlohmann::ordered_json(std::string(optimizer_name(o.optimizer)))
                                                : nlohmann::ordered_json(nullptr);
  j["foreach"] = o.mode == RunMode::Training ? nlohmann::ordered_json(e.foreach) : nlohmann::ordered_json(nullptr);
  j["precision"] = std::string(precision_name(o.precision));
  j["device"] = o.device;
  j["micro_batch"] = e.micro_batch;
  j["parameter_count"] = e.parameter_count;
  j["trainable_parameter_count"] = e.trainable_parameter_count;
  j["weights_bytes"] = e.weights_bytes;
  j["input_bytes"] = e.input_bytes;
  j["peak_bytes"] = e.peak_bytes;
  j["peak_phase"] = std::string(phase_name(e.peak_phase));
  j["peak_op"] = e.peak_op;
  if (o.generation) {
    j["peak_step"] = forward_name(e.peak_forward);
    j["kv_cache_bytes"] = e.kv_cache_bytes;
  }
  nlohmann::ordered_json bd = nlohmann::ordered_json::object();
  for (size_t c = 0; c < kCategoryCount; ++c) {
    if (static_cast<Category>(c) == Category::KvCache && !o.generation) continue;  // only generation has one
    bd[std::string(category_name(static_cast<Category>(c)))] = e.breakdown_at_peak[c];
  }
  j["breakdown_at_peak"] = bd;
  nlohmann::ordered_json largest = nlohmann::ordered_json::array();
  for (const BufferAtPeak& b : e.largest_at_peak) {
    largest.push_back({{"name", b.name}, {"category", std::string(category_name(b.category))}, {"bytes", b.bytes}, {"op", b.op}});
  }
  j["largest_at_peak"] = largest;
  if (o.mode == RunMode::Training) {
    nlohmann::ordered_json steps = nlohmann::ordered_json::array();
    for (const IterationSummary& it : e.iterations) {
      nlohmann::ordered_json phases = nlohmann::ordered_json::object();
      for (const PhasePeak& pp : it.phases) phases[std::string(phase_name(pp.phase))] = pp.bytes;
      steps.push_back({{"step", it.iteration}, {"peak_bytes", it.peak_bytes},
                       {"peak_phase", std::string(phase_name(it.peak_phase))}, {"peak_op", it.peak_op},
                       {"phase_peaks", phases}});
    }
    j["steps"] = steps;
  }
  if (e.device) device_json(*e.device, j);
  if (e.time) {
    j["load_time_ms"] = e.time->load.ms;
    j["step_time_ms"] = e.time->step.total_ms;
    j["throughput"] = {{"value", e.time->throughput.value}, {"unit", e.time->throughput.unit}};
    j["time"] = time_json(*e.time);
  }
  if (e.per_gpu) {
    const PerGpu& g = *e.per_gpu;
    j["per_gpu"] = {{"layout", {{"gpus", g.gpus}, {"data_parallel", g.data_parallel},
                                {"tensor_parallel", g.tensor_parallel}, {"sequence_parallel", g.sequence_parallel},
                                {"engine", g.engine},
                                {"zero_stage", g.zero_stage}, {"description", g.layout}}},
                    {"pipeline_parallel", g.pipeline_parallel},
                    {"model_states_bytes", g.model_states_bytes},
                    {"activations_bytes", g.activations_bytes},
                    {"peak_bytes", g.peak_bytes},
                    {"host_bytes", g.host_bytes},
                    {"nvme_bytes", g.nvme_bytes}};
    if (!g.fsdp_wrap.empty()) j["per_gpu"]["layout"]["fsdp_wrap"] = g.fsdp_wrap;
    if (g.pipeline_parallel > 1) {
      j["per_gpu"]["pipeline_schedule"] = g.pipeline_schedule;
      j["per_gpu"]["stage"] = g.stage;
      j["per_gpu"]["in_flight_micro_batches"] = g.in_flight_micro_batches;
      j["per_gpu"]["stage_peak_bytes"] = g.stage_peak_bytes;
    }
  }
  j["notes"] = e.notes;
  return j.dump(2) + "\n";
}

}  // namespace headroom

namespace headroom {

std::string program_trace(const Program& p) {
  std::string s;
  int64_t total = 0;
  for (const Step& st : p.steps) {
    for (int32_t ei = st.first_event; ei < st.end_event; ++ei) {
      const Event& e = p.events[static_cast<size_t>(ei)];
      if (e.kind == Event::Kind::Retag) continue;
      const Buffer& b = p.buffers[static_cast<size_t>(e.buffer)];
      int64_t d = e.kind == Event::Kind::Alloc ? b.bytes : -b.bytes;
      total += d;
      s += fmt::format("{:+14d} {:14d}  {:9s} {:<3} {:<40} {}\n", d, total, phase_name(st.phase),
                       st.iteration, st.label.substr(0, 40), b.name);
    }
  }
  return s;
}

}  // namespace headroom
