// The general-graph rematerialization model (docs/ilp.md): the chain model of docs/chain-solver.md
// with arbitrary predecessor edges. L forward stages 0..L-1 in topological order, then the loss.
// Activation a_0 is the network input; stage i produces a_{i+1} from the activations preds[i]
// (indices in 0..i); the loss reads a_L. δ_k, the gradient of a_k, has the size of a_k and is
// accumulated by the backward of every stage that reads a_k. On a chain (preds[i] = {i}) every
// definition here is the chain model's.
//
// Invariants after validate_remat_graph: the sizes and times are a valid Chain (chain_model.h:
// x_bytes has L+1 entries, xbar_bytes[i] >= x_bytes[i+1], ...); preds has L entries, each
// non-empty, strictly increasing, within 0..i; every activation 0..L-1 is read by some stage (so
// every stage leads to the loss).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "plan/chain_model.h"
#include "util/error.h"

namespace headroom {

struct RematGraph {
  Chain sizes;                         // times and sizes, read exactly as for a chain
  std::vector<std::vector<int>> preds;  // preds[i]: the activations stage i reads

  int length() const { return sizes.length(); }
};

// Throws InputError with one line naming the first problem.
void validate_remat_graph(const RematGraph& graph);

// The chain itself as a graph: preds[i] = {i}.
RematGraph graph_of_chain(const Chain& chain);

// For the lead's planner: the graph of plain arrays (as the JSON fields), validated.
Result<RematGraph> make_remat_graph(std::vector<double> fwd_ms, std::vector<double> bwd_ms,
                                   std::vector<int64_t> x_bytes, std::vector<int64_t> xbar_bytes,
                                   std::vector<int64_t> fwd_tmp_bytes,
                                   std::vector<int64_t> bwd_tmp_bytes, double loss_ms,
                                   int64_t loss_tmp_bytes, std::vector<std::vector<int>> preds);

// The JSON of a chain file plus "preds": an array of L arrays of activation indices (absent: a
// chain). The object may sit under a top-level "graph" key. Errors name the field.
Result<RematGraph> parse_remat_graph_json(std::string_view text, const std::string& source = "graph");
Result<RematGraph> load_remat_graph_file(const std::string& path);
std::string remat_graph_json(const RematGraph& graph);

// consumers[k]: the stages that read a_k, increasing (k = 0..L-1; the loss reads a_L).
std::vector<std::vector<int>> remat_consumers(const RematGraph& graph);

// The operations of a schedule. Forwards as in the chain model, plus an explicit discard:
//   Fck<i>  forward of stage i, keeps its inputs, adds x_{i+1}
//   Fn<i>   forward of stage i, frees every input after the op, adds x_{i+1}
//   Fall<i> forward with history, keeps its inputs, adds x̄_{i+1}
//   Free<k> discards a_k (x_k or x̄_k, whichever is live); no time, no memory of its own
//   Loss    adds δ_L, frees a plain x_L
//   B<i>    backward of stage i (docs/ilp.md)
enum class RematOpKind : uint8_t { Fck, Fn, Fall, Free, Loss, B };

struct RematOp {
  RematOpKind kind = RematOpKind::Loss;
  int index = 0;  // the stage (forwards, B), the activation (Free); 0 for Loss
  friend bool operator==(const RematOp&, const RematOp&) = default;
};

std::string remat_op_token(RematOp op);
// InputError on an unknown token.
RematOp parse_remat_op_token(std::string_view token);

}  // namespace headroom
