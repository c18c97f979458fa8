// serve: how many KV-cache blocks a GPU holds for a model served the way vLLM sizes its cache
// (vllm/worker/worker.py Worker.determine_num_available_blocks, v0.6): profile one forward of
// max_num_batched_tokens dummy tokens spread over max_num_seqs sequences, take the allocator's
// peak plus the memory outside PyTorch (the CUDA context), and give what is left of
// gpu_memory_utilization x the device memory to fixed-size blocks of block_size tokens
// (CacheEngine.get_cache_block_size: block_size x kv_heads x head_dim x 2 x layers x bytes).
//
// The profile forward here is transformers' (hf_decoder.cc; flash attention for fp16/bf16, as
// vLLM's backend) on max_num_seqs sequences of ceil(tokens / max_num_seqs) tokens, with the
// logits of each sequence's last token; vLLM's fused kernels (RMSNorm, SiLU-and-mul, rotary in
// place) and its sampler's float32 copies of those logits differ, so the profile peak
// approximates vLLM's rather than reproducing it.
#pragma once

#include <cstdint>
#include <string>

#include "estimate/estimate.h"

namespace headroom {

struct ServeOptions {
  EstimateOptions estimate;            // a Hugging Face decoder and a GPU (estimate.gpu) are required
  int64_t context = 0;                 // --context: vLLM's max_model_len
  int64_t block_size = 16;             // --block-size
  double gpu_memory_utilization = 0.9; // --gpu-memory-utilization
  int64_t max_num_seqs = 256;          // vLLM's default
  // KV cache bytes per token at the model's dtype (model_source.h kv_cache_bytes_per_token).
  int64_t kv_bytes_per_token = 0;
};

struct ServeResult {
  std::string gpu;
  int64_t capacity_bytes = 0;        // total device memory
  int64_t usable_bytes = 0;          // capacity x gpu_memory_utilization
  int64_t profile_tokens = 0;        // max_num_batched_tokens = max(context, 2048)
  int64_t profile_sequences = 0;     // min(max_num_seqs, profile_tokens)
  int64_t profile_peak_bytes = 0;    // allocated peak of the profile forward (weights included)
  int64_t non_torch_bytes = 0;       // CUDA context
  int64_t kv_budget_bytes = 0;       // usable - profile peak - non-torch (may be negative)
  int64_t block_bytes = 0;
  int64_t num_blocks = 0;
  int64_t max_sequences = 0;         // sequences of `context` tokens held at once
  int64_t longest_context = 0;       // num_blocks x block_size
};

Result<ServeResult> serve_capacity(const ServeOptions& options);

std::string serve_text(const ServeOptions& options, const ServeResult& r);
std::string serve_json(const ServeOptions& options, const ServeResult& r);

}  // namespace headroom
