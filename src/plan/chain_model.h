// The chain model of checkpointing plans (docs/chain-solver.md, after the shared chain-model spec):
// L stages 0..L-1, then the loss stage L. Stage i maps activation a_i to a_{i+1}; δ_i is the
// gradient of a_i and has the size of a_i. This file holds the chain itself, its JSON loader, and
// the five operations a schedule is made of.
//
//   stage        0          1               L-1         loss
//   a_0 ──F_0──> a_1 ──F_1──> a_2 ... a_{L-1} ──F_{L-1}──> a_L ──Loss──> δ_L
//   δ_0 <──B_0── δ_1 <──B_1── δ_2 ... δ_{L-1} <──B_{L-1}── δ_L
//
// Buffers: x_i (a_i without history), x̄_i (i >= 1: a_i plus what stage i-1 saved for its
// backward), δ_i. Sizes are bytes, times are milliseconds; both are non-negative.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace headroom {

// A chain as the JSON file gives it. Invariant after validate_chain: L = fwd_ms.size() >= 1, the
// per-stage arrays have L entries, x_bytes has L+1, every value is finite and non-negative,
// xbar_bytes[i] >= x_bytes[i+1], and every sum of sizes fits in int64.
struct Chain {
  std::vector<double> fwd_ms;          // f_i: one forward of stage i (any mode)
  std::vector<double> bwd_ms;          // b_i: the backward of stage i
  std::vector<int64_t> x_bytes;        // x_i, i = 0..L: a_i (and δ_i); x_L is the loss input
  std::vector<int64_t> xbar_bytes;     // x̄_{i+1}: left allocated by stage i run with history
  std::vector<int64_t> fwd_tmp_bytes;  // transient of the forward of stage i
  std::vector<int64_t> bwd_tmp_bytes;  // transient of the backward of stage i
  double loss_ms = 0;                  // ℓ: the loss and the start of its backward
  int64_t loss_tmp_bytes = 0;          // transient while the loss runs

  int length() const { return static_cast<int>(fwd_ms.size()); }
  // x̄_i for i = 1..L.
  int64_t xbar(int i) const { return xbar_bytes[static_cast<size_t>(i - 1)]; }
  int64_t x(int i) const { return x_bytes[static_cast<size_t>(i)]; }
};

// Throws InputError with one line naming the first problem (field, index, value).
void validate_chain(const Chain& chain);

// The chain of a JSON text: one object with fwd_ms, bwd_ms, x_bytes, xbar_bytes, fwd_tmp_bytes,
// bwd_tmp_bytes (arrays), loss_ms and loss_tmp_bytes (numbers); the same object may also sit
// under a top-level "chain" key. Other keys are ignored. Sizes must be whole numbers of bytes.
// The result is validated. `source` names the text in messages (a file name).
Result<Chain> parse_chain_json(std::string_view text, const std::string& source = "chain");
Result<Chain> load_chain_file(const std::string& path);
// The chain of an already parsed object (the fields above); InputError naming the field.
Chain chain_from_json(const nlohmann::json& object);
// The JSON object parse_chain_json reads (fields in the order above).
std::string chain_json(const Chain& chain);

// Σ f_i + Σ b_i + ℓ: every op once, no recomputation.
double no_checkpoint_makespan_ms(const Chain& chain);

// The five operations (docs/chain-solver.md, "Operations").
enum class ChainOpKind : uint8_t {
  Fck,   // forward, keeps its input, adds x_{i+1}
  Fn,    // forward, frees its input, adds x_{i+1}
  Fall,  // forward with history, adds x̄_{i+1}
  Loss,  // adds δ_L, frees a plain x_L
  B,     // backward of stage i: frees δ_{i+1}, x̄_{i+1} and a plain x_i, adds δ_i
};

struct ChainOp {
  ChainOpKind kind = ChainOpKind::Loss;
  int stage = 0;  // i; always 0 for Loss
  friend bool operator==(const ChainOp&, const ChainOp&) = default;
};

// "Fck0", "Fn1", "Fall2", "Loss", "B2".
std::string op_token(ChainOp op);
// The op of a token; InputError on anything else (stage bounds are the simulator's business).
ChainOp parse_op_token(std::string_view token);

}  // namespace headroom
