// Turns a Graph into the Program of an inference run or of training iterations under PyTorch's
// eager semantics. It interprets the graph the way Python and the autograd engine hold
// references: a buffer is freed when the last reference to its storage goes (remaining forward
// uses, Python locals, autograd's saved tensors, pending gradients, param.grad, optimizer state).
//
// Stages of one training iteration (see docs/memory-model.md):
//   forward   ops in graph order; outputs allocated, saved tensors referenced by their node;
//   backward  the loss gradient seed, then autograd nodes in decreasing creation order (the
//             engine's ready queue); each node allocates its input gradients, drops its incoming
//             gradient and its saved tensors, then delivers gradients (accumulating into
//             pending buffers); AccumulateGrad steals or clones parameter gradients;
//   optimizer state on the first step, update temporaries, then zero_grad (set_to_none=True
//             frees the gradients; ZeroGrad::Zeros keeps them for the next step).
#pragma once

#include "ir/graph.h"
#include "schedule/memory_plan.h"
#include "schedule/pipeline_schedule.h"
#include "schedule/program.h"
#include "schedule/sharding.h"
#include "training/device_profile.h"
#include "training/optimizer.h"

namespace headroom {

enum class RunMode : uint8_t { Inference, Training };

struct ScheduleOptions {
  RunMode mode = RunMode::Training;
  OptimizerKind optimizer = OptimizerKind::Sgd;
  bool foreach = false;           // the resolved optimizer implementation
  int iterations = 2;             // training steps simulated (step 1 creates optimizer state)
  int micro_batches = 1;          // forward+backward passes per optimizer step
  ZeroGrad zero_grad = ZeroGrad::SetToNone;  // what zero_grad() after each step does
  DeviceProfile device = DeviceProfile::cuda();
  MemoryPlan plan;                // checkpointing, offloading, workspace choices (training)
  Sharding sharding;              // ZeRO / FSDP: the program of one data-parallel rank
  PipelineRun pipeline;           // a pipeline stage: its micro-batches in the schedule's order
  // Whether the program carries names: Buffer::name, and the label of a step that runs one op of
  // the graph (its op's name). A search that reads only peaks and times (PlanContext::evaluate)
  // turns them off: building and freeing a string per buffer and per step was the largest single
  // cost of the layout search (docs/speed.md). Without names, every Buffer::name is "" and an op
  // step's label is "" (its op is Step::op); the labels of other steps (optimizer, setup,
  // recompute, pipeline sends), which the cost model reads, are kept. Nothing else differs.
  bool names = true;
};

// REQUIRES: g.validate() passes; for training, g.loss is set.
Program build_program(const Graph& g, const ScheduleOptions& options);

}  // namespace headroom
