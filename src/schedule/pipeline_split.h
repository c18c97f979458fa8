// Pipeline parallelism's split of a model into stages: the graph ONE pipeline rank runs
// (docs/distributed.md, "Pipeline parallelism"). The model's repeated blocks
// (schedule/transformer_blocks.h) are dealt to P stages in order, L / P each, as Megatron's
// get_num_layers_to_build (megatron/core/transformer/transformer_block.py) does without
// first/last-stage overrides; an uneven split is refused, as Megatron's validate_args does.
//
//   stage 0:        what runs before the first block (the embedding) + its blocks;
//   middle stages:  their blocks;
//   last stage:     its blocks + what runs after the last block (final norm, LM head, loss).
//
// A stage after the first receives the hidden state from the previous stage (p2p recv): in its
// graph that tensor is a leaf, `received`, with the producer's shape and dtype. Tensors the
// blocks read that do not depend on a trainable parameter (attention masks, position ids,
// rotary tables) are recomputed by every stage, as Megatron's GPTModel does on each stage: the
// ops making them are copied into the stage's graph. A stage before the last sends its hidden
// state on: in its graph that tensor is `graph.loss` (the backward starts from the gradient
// received for it) and the model's outputs and targets are not part of it. A parameter tied to
// one the stage does not hold (GPT-2's lm_head, tied to wte) becomes the stage's own copy, as
// Megatron's last stage allocates the word embeddings for its output layer
// (LanguageModule.setup_embeddings_and_output_layer).
//
// Invariants: the stage graph passes Graph::validate; ops keep their graph order and names;
// exactly one tensor requiring grad crosses each stage boundary, or the split is refused.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "schedule/memory_plan.h"
#include "schedule/pipeline_schedule.h"

namespace headroom {

struct StageGraph {
  Graph graph;
  int stage = 0;
  int first_block = 0;  // index of the stage's first block in the model
  int blocks = 0;       // blocks the stage holds
  // The hidden state received from the previous stage (a leaf of role Input that the pipeline
  // driver allocates per micro-batch); kNone on the first stage.
  TensorId received = kNone;
  // Whether graph.loss is the hidden state sent to the next stage (every stage but the last).
  bool sends = false;
};

// What the stages of one model graph are cut along: its blocks (transformer_blocks) and which
// tensors carry gradients. Found once per model graph and read by every stage and chunk cut from
// it (a pipeline evaluation cuts several ranks from one graph).
struct PipelineCut {
  std::vector<CheckpointSegment> blocks;
  std::vector<bool> grad;
};
PipelineCut pipeline_cut(const Graph& g);

// Blocks per stage under Megatron's even split. InputError when the model has no repeated
// blocks, when P exceeds them or does not divide them.
int blocks_per_stage(const PipelineCut& cut, int stages, const std::string& model);

// The graph of pipeline stage `stage` of `stages` (0-based). REQUIRES: g has a loss.
// InputError for a split the model does not allow (see the header comment).
StageGraph pipeline_stage_graph(const Graph& g, int stages, int stage);

// The graph of pipeline rank `rank` of `stages` holding `virtual_stages` model chunks (v = 1:
// its stage; v > 1, the interleaved schedule: virtual stages c * P + rank of P * v, Megatron's
// model chunks), one chunk after the other in one graph, with each chunk's ops, received and
// output tensors. Leaves of the same name in several chunks (a rotary table, the token ids) are
// one tensor, as they are one module or one batch on the rank.
struct RankGraph {
  Graph graph;
  std::vector<PipelineChunk> chunks;
};
RankGraph pipeline_rank_graph(const Graph& g, int stages, int virtual_stages, int rank);
// The same with g's cut found before (pipeline_cut(g)).
RankGraph pipeline_rank_graph(const Graph& g, const PipelineCut& cut, int stages, int virtual_stages, int rank);

}  // namespace headroom
