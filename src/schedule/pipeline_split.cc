// Pipeline stage graphs (pipeline_split.h). Stages: find the blocks, choose the stage's ops (its
// blocks, the prologue on the first stage, the epilogue on the last, the parameter-free ops
// whose outputs its blocks read), then copy those ops and the tensors they touch into a new
// graph with dense ids, turning the received hidden state into a leaf.
#include "schedule/pipeline_split.h"

#include <algorithm>
#include <map>

#include "schedule/transformer_blocks.h"
#include "util/error.h"

namespace headroom {
namespace {

// Per tensor: whether its value depends on a trainable parameter (gradients flow through it).
std::vector<bool> carries_gradient(const Graph& g) {
  std::vector<bool> r(g.tensors.size(), false);
  for (const Tensor& t : g.tensors) r[static_cast<size_t>(t.id)] = t.requires_grad();
  for (const Op& op : g.ops) {
    bool any = false;
    for (TensorId in : op.inputs) any = any || r[static_cast<size_t>(in)];
    for (TensorId out : op.outputs) r[static_cast<size_t>(out)] = any;
  }
  return r;
}

std::string stage_text(int stage, int stages) { return "pipeline stage " + std::to_string(stage) + " of " + std::to_string(stages); }

int checked_blocks_per_stage(int layers, int stages, const std::string& model) {
  if (layers == 0) {
    throw InputError("--pipeline-parallel: model '" + model + "' has no repeated blocks (PREFIX.<i> modules) to split into pipeline stages");
  }
  if (stages > layers) {
    throw InputError("--pipeline-parallel " + std::to_string(stages) + " is more than the " + std::to_string(layers) + " layers of " + model +
                     " (each stage needs at least one)");
  }
  if (layers % stages != 0) {
    throw InputError("--pipeline-parallel " + std::to_string(stages) + " does not divide the " + std::to_string(layers) + " layers of " + model +
                     " (Megatron splits the layers evenly: num_layers % pipeline-model-parallel-size == 0)");
  }
  return layers / stages;
}

StageGraph stage_graph(const Graph& g, const PipelineCut& cut, int stages, int stage) {
  HEADROOM_CHECK(stage >= 0 && stage < stages, "stage out of range");
  const int per_stage = checked_blocks_per_stage(static_cast<int>(cut.blocks.size()), stages, g.model);
  const std::vector<CheckpointSegment>& blocks = cut.blocks;
  const bool first = stage == 0, last = stage == stages - 1;
  const OpId begin = first ? 0 : blocks[static_cast<size_t>(stage * per_stage)].first;
  const OpId end = last ? static_cast<OpId>(g.ops.size()) - 1 : blocks[static_cast<size_t>((stage + 1) * per_stage - 1)].last;
  const std::vector<bool>& grad = cut.grad;

  // The stage's own ops, then what they read from before `begin`: the one hidden state (received)
  // and parameter-free values, whose ops are copied (recursively) so the stage computes them.
  std::vector<bool> keep(g.ops.size(), false);
  for (OpId o = begin; o <= end; ++o) keep[static_cast<size_t>(o)] = true;
  TensorId received = kNone;
  std::vector<OpId> work;
  for (OpId o = begin; o <= end; ++o) work.push_back(o);
  while (!work.empty()) {
    const Op& op = g.op(work.back());
    work.pop_back();
    for (TensorId in : op.inputs) {
      const OpId p = g.tensor(in).producer;
      if (p == kNone || keep[static_cast<size_t>(p)]) continue;
      if (grad[static_cast<size_t>(in)]) {
        if (received != kNone && received != in) {
          throw InputError("--pipeline-parallel: " + stage_text(stage, stages) + " of " + g.model + " would receive both '" +
                           g.tensor(received).name + "' and '" + g.tensor(in).name +
                           "' from earlier stages; only a single hidden state between stages is modelled");
        }
        received = in;
        continue;
      }
      keep[static_cast<size_t>(p)] = true;
      work.push_back(p);
    }
  }
  HEADROOM_CHECK(first || received != kNone, "a later stage reads no hidden state");

  // What the stage sends: the one gradient-carrying tensor made by its ops and read after `end`.
  TensorId sent = kNone;
  if (!last) {
    for (OpId o = end + 1; o < static_cast<OpId>(g.ops.size()); ++o) {
      for (TensorId in : g.op(o).inputs) {
        const OpId p = g.tensor(in).producer;
        if (p == kNone || p < begin || p > end || !grad[static_cast<size_t>(in)]) continue;
        if (sent != kNone && sent != in) {
          throw InputError("--pipeline-parallel: " + stage_text(stage, stages) + " of " + g.model + " would send both '" +
                           g.tensor(sent).name + "' and '" + g.tensor(in).name +
                           "' to later stages; only a single hidden state between stages is modelled");
        }
        sent = in;
      }
    }
    HEADROOM_CHECK(sent != kNone, "a stage sends nothing on");
  }

  // Tensors of the stage: every input and output of a kept op, in the model's id order (so a
  // view's source keeps a smaller id).
  std::vector<bool> used(g.tensors.size(), false);
  for (const Op& op : g.ops) {
    if (!keep[static_cast<size_t>(op.id)]) continue;
    for (TensorId t : op.inputs) used[static_cast<size_t>(t)] = true;
    for (TensorId t : op.outputs) used[static_cast<size_t>(t)] = true;
  }
  if (last) {
    for (TensorId t : g.targets) used[static_cast<size_t>(t)] = true;
  }
  std::vector<TensorId> new_id(g.tensors.size(), kNone);
  StageGraph r;
  r.stage = stage;
  r.first_block = stage * per_stage;
  r.blocks = per_stage;
  r.sends = !last;
  Graph& s = r.graph;
  s.model = g.model;
  s.dims = g.dims;
  s.notes = g.notes;
  s.block_class = g.block_class;
  for (const Tensor& t : g.tensors) {
    if (!used[static_cast<size_t>(t.id)]) continue;
    new_id[static_cast<size_t>(t.id)] = static_cast<TensorId>(s.tensors.size());
    Tensor c = t;
    c.id = new_id[static_cast<size_t>(t.id)];
    s.tensors.push_back(c);
  }
  auto map = [&](TensorId t) { return t == kNone ? kNone : new_id[static_cast<size_t>(t)]; };
  for (Tensor& t : s.tensors) {
    t.alias_of = map(t.alias_of);
    if (t.tied_to != kNone) {
      // Tied to a parameter this stage does not hold: the stage's own copy (Megatron's last stage).
      const TensorId to = map(t.tied_to);
      t.tied_to = to;
    }
  }
  std::vector<OpId> new_op(g.ops.size(), kNone);
  for (const Op& op : g.ops) {
    if (!keep[static_cast<size_t>(op.id)]) continue;
    Op c = op;
    c.id = static_cast<OpId>(s.ops.size());
    new_op[static_cast<size_t>(op.id)] = c.id;
    for (TensorId& t : c.inputs) t = map(t);
    for (TensorId& t : c.outputs) t = map(t);
    s.ops.push_back(std::move(c));
  }
  for (Tensor& t : s.tensors) {
    if (t.producer != kNone) t.producer = new_op[static_cast<size_t>(t.producer)];
  }
  if (received != kNone) {
    Tensor& rt = s.tensors[static_cast<size_t>(map(received))];
    rt.producer = kNone;
    rt.role = TensorRole::Input;
    rt.alias_of = kNone;
    rt.name = "p2p recv " + rt.name;
    rt.input_requires_grad = true;
    r.received = rt.id;
  }
  for (TensorId t : g.inputs) {
    if (map(t) != kNone) s.inputs.push_back(map(t));
  }
  for (const Hold& h : g.holds) {
    if (map(h.tensor) != kNone && new_op[static_cast<size_t>(h.until)] != kNone) s.holds.push_back({map(h.tensor), new_op[static_cast<size_t>(h.until)]});
  }
  if (last) {
    for (TensorId t : g.targets) s.targets.push_back(map(t));
    for (TensorId t : g.outputs) {
      if (map(t) != kNone) s.outputs.push_back(map(t));
    }
    s.loss = map(g.loss);
    for (TensorId t : g.loss_terms) {
      if (map(t) != kNone) s.loss_terms.push_back(map(t));
    }
  } else {
    s.loss = map(sent);
  }
  s.validate();
  return r;
}

}  // namespace

PipelineCut pipeline_cut(const Graph& g) { return {transformer_blocks(g).segments, carries_gradient(g)}; }

int blocks_per_stage(const PipelineCut& cut, int stages, const std::string& model) {
  return checked_blocks_per_stage(static_cast<int>(cut.blocks.size()), stages, model);
}

StageGraph pipeline_stage_graph(const Graph& g, int stages, int stage) {
  HEADROOM_CHECK(g.loss != kNone, "a pipeline stage needs a training graph");
  return stage_graph(g, pipeline_cut(g), stages, stage);
}

RankGraph pipeline_rank_graph(const Graph& g, int stages, int virtual_stages, int rank) {
  return pipeline_rank_graph(g, pipeline_cut(g), stages, virtual_stages, rank);
}

RankGraph pipeline_rank_graph(const Graph& g, const PipelineCut& cut, int stages, int virtual_stages, int rank) {
  HEADROOM_CHECK(g.loss != kNone, "a pipeline stage needs a training graph");
  RankGraph r;
  if (virtual_stages == 1) {
    // One chunk: the rank's graph is its stage's graph as it is (the merge below would copy it
    // with every id mapped to itself).
    StageGraph sg = stage_graph(g, cut, stages, rank);
    r.chunks.push_back({.first = 0, .last = static_cast<OpId>(sg.graph.ops.size()) - 1, .received = sg.received, .output = sg.graph.loss, .sends = sg.sends});
    r.graph = std::move(sg.graph);
    return r;
  }
  Graph& m = r.graph;
  std::map<std::string, TensorId> leaf_by_name;
  for (int c = 0; c < virtual_stages; ++c) {
    StageGraph sg = stage_graph(g, cut, stages * virtual_stages, c * stages + rank);
    Graph& s = sg.graph;  // its tensors and ops are moved into the rank's graph
    if (c == 0) {
      m.model = s.model;
      m.dims = s.dims;
      m.notes = s.notes;
      m.block_class = s.block_class;
    }
    std::vector<TensorId> id(s.tensors.size(), kNone);
    std::vector<std::pair<std::string, TensorId>> new_leaves;  // shared with later chunks, not within this one
    const TensorId tensor_base = static_cast<TensorId>(m.tensors.size());
    const OpId op_base = static_cast<OpId>(m.ops.size());
    for (Tensor& t : s.tensors) {
      const bool shared_leaf = t.producer == kNone && t.id != sg.received && t.tied_to == kNone;
      if (shared_leaf) {
        auto it = leaf_by_name.find(t.name);
        if (it != leaf_by_name.end()) {
          id[static_cast<size_t>(t.id)] = it->second;
          continue;
        }
      }
      const TensorId was = t.id;
      Tensor x = std::move(t);
      x.id = static_cast<TensorId>(m.tensors.size());
      id[static_cast<size_t>(was)] = x.id;
      if (shared_leaf) new_leaves.emplace_back(x.name, x.id);
      m.tensors.push_back(std::move(x));
    }
    leaf_by_name.insert(new_leaves.begin(), new_leaves.end());
    auto map = [&](TensorId t) { return t == kNone ? kNone : id[static_cast<size_t>(t)]; };
    for (size_t i = static_cast<size_t>(tensor_base); i < m.tensors.size(); ++i) {
      Tensor& t = m.tensors[i];
      t.alias_of = map(t.alias_of);
      t.tied_to = map(t.tied_to);
      if (t.producer != kNone) t.producer += op_base;
    }
    for (Op& op : s.ops) {
      Op x = std::move(op);
      x.id += op_base;
      for (TensorId& t : x.inputs) t = map(t);
      for (TensorId& t : x.outputs) t = map(t);
      m.ops.push_back(std::move(x));
    }
    auto add_unique = [](std::vector<TensorId>& list, TensorId t) {
      if (std::find(list.begin(), list.end(), t) == list.end()) list.push_back(t);
    };
    for (TensorId t : s.inputs) add_unique(m.inputs, map(t));
    for (TensorId t : s.targets) add_unique(m.targets, map(t));
    for (TensorId t : s.outputs) m.outputs.push_back(map(t));
    for (TensorId t : s.loss_terms) m.loss_terms.push_back(map(t));
    for (const Hold& h : s.holds) m.holds.push_back({map(h.tensor), h.until + op_base});
    if (!sg.sends) m.loss = map(s.loss);
    PipelineChunk chunk;
    chunk.first = op_base;
    chunk.last = static_cast<OpId>(m.ops.size()) - 1;
    chunk.received = map(sg.received);
    chunk.output = map(s.loss);
    chunk.sends = sg.sends;
    r.chunks.push_back(chunk);
  }
  // A rank without the model's loss still needs one for Graph's training invariants: its last
  // chunk's output is what its backward starts from.
  if (m.loss == kNone) m.loss = r.chunks.back().output;
  m.validate();
  return r;
}

}  // namespace headroom
