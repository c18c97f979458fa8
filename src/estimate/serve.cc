#include "estimate/serve.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/checked.h"
#include "util/format.h"

namespace headroom {

Result<ServeResult> serve_capacity(const ServeOptions& o) {
  return capture_input_errors([&]() -> ServeResult {
    if (!o.estimate.gpu) throw InputError("--mode serve needs a GPU: --gpu NAME or --gpu-memory SIZE");
    if (o.context <= 0) throw InputError("--mode serve needs --context N (the longest sequence served, vLLM's max_model_len)");
    if (o.block_size <= 0) throw InputError("--block-size must be positive");
    if (!(o.gpu_memory_utilization > 0.0 && o.gpu_memory_utilization <= 1.0)) {
      throw InputError("--gpu-memory-utilization must be in (0, 1]");
    }
    if (o.estimate.mode != RunMode::Inference || o.estimate.generation) throw InputError("--mode serve is an inference profile");
    ServeResult r;
    r.profile_tokens = std::max<int64_t>(o.context, 2048);
    r.profile_sequences = std::min(o.max_num_seqs, r.profile_tokens);
    EstimateOptions e = o.estimate;
    // vLLM's attention backend is flash-attn for fp16/bf16 (XFormers or Torch SDPA otherwise).
    if (e.attention == AttentionKind::Default && (e.precision == Precision::Bf16 || e.precision == Precision::Fp16)) {
      e.attention = AttentionKind::Flash;
    }
    // profile_run: max_num_seqs dummy sequences sharing max_num_batched_tokens (the first ones
    // one token longer when it does not divide); here all as long as the longest, and the
    // logits of each sequence's last token.
    e.batch = r.profile_sequences;
    e.seq = (r.profile_tokens + r.profile_sequences - 1) / r.profile_sequences;
    e.logits_to_keep = 1;
    e.top_tensors = 0;
    Result<Estimate> est = estimate(e);
    if (!est.ok()) throw InputError(est.error());
    const DeviceMemory& d = *est.value().device;
    r.gpu = d.gpu;
    r.capacity_bytes = d.capacity_bytes;
    r.usable_bytes = static_cast<int64_t>(std::floor(static_cast<double>(d.capacity_bytes) * o.gpu_memory_utilization));
    r.profile_peak_bytes = d.allocated_peak_bytes;
    r.non_torch_bytes = d.context_bytes + d.nccl_bytes;
    r.kv_budget_bytes = r.usable_bytes - r.profile_peak_bytes - r.non_torch_bytes;
    if (o.kv_bytes_per_token <= 0) throw InputError("--mode serve needs the model's KV cache size per token");
    r.block_bytes = checked_mul(o.block_size, o.kv_bytes_per_token, "KV block");
    r.num_blocks = r.kv_budget_bytes > 0 ? r.kv_budget_bytes / r.block_bytes : 0;
    const int64_t blocks_per_seq = (o.context + o.block_size - 1) / o.block_size;
    r.max_sequences = r.num_blocks / blocks_per_seq;
    r.longest_context = checked_mul(r.num_blocks, o.block_size, "longest context");
    return r;
  });
}

std::string serve_text(const ServeOptions& o, const ServeResult& r) {
  std::string s = fmt::format("headroom fit --mode serve: {}, {}, context {}, block size {}, gpu_memory_utilization {}\n\n",
                              o.estimate.model, precision_name(o.estimate.precision), o.context, o.block_size,
                              o.gpu_memory_utilization);
  s += fmt::format("on {} ({})\n", r.gpu, human_bytes(r.capacity_bytes));
  s += fmt::format("  {:<46} {:>10}\n", "usable (x gpu_memory_utilization)", human_bytes(r.usable_bytes));
  s += fmt::format("  {:<46} {:>10}\n", fmt::format("profile peak ({} tokens in {} sequences)", r.profile_tokens, r.profile_sequences),
                   human_bytes(r.profile_peak_bytes));
  s += fmt::format("  {:<46} {:>10}\n", "outside PyTorch (CUDA context)", human_bytes(r.non_torch_bytes));
  s += fmt::format("  {:<46} {:>10}\n", "KV cache", human_bytes(std::max<int64_t>(r.kv_budget_bytes, 0)));
  s += fmt::format("  {:<46} {:>10}\n", fmt::format("block ({} tokens)", o.block_size), human_bytes(r.block_bytes));
  s += fmt::format("\nKV blocks {} -> {} sequences of {} tokens at once; one sequence up to {} tokens\n",
                   with_commas(r.num_blocks), with_commas(r.max_sequences), o.context, with_commas(r.longest_context));
  if (r.longest_context < o.context) {
    s += fmt::format("vLLM refuses this: the context {} is longer than the {} tokens the KV cache holds\n", o.context,
                     r.longest_context);
  }
  return s;
}

std::string serve_json(const ServeOptions& o, const ServeResult& r) {
  nlohmann::ordered_json j;
  j["model"] = o.estimate.model;
  j["mode"] = "serve";
  j["precision"] = std::string(precision_name(o.estimate.precision));
  j["gpu"] = r.gpu;
  j["gpu_memory_bytes"] = r.capacity_bytes;
  j["gpu_memory_utilization"] = o.gpu_memory_utilization;
  j["context"] = o.context;
  j["block_size"] = o.block_size;
  j["usable_bytes"] = r.usable_bytes;
  j["profile_tokens"] = r.profile_tokens;
  j["profile_sequences"] = r.profile_sequences;
  j["profile_peak_bytes"] = r.profile_peak_bytes;
  j["non_torch_bytes"] = r.non_torch_bytes;
  j["kv_cache_bytes"] = r.kv_budget_bytes;
  j["block_bytes"] = r.block_bytes;
  j["num_blocks"] = r.num_blocks;
  j["max_sequences"] = r.max_sequences;
  j["longest_context"] = r.longest_context;
  return j.dump(2) + "\n";
}

}  // namespace headroom
