// Pipeline parallelism in the interpreter: one stage's micro-batches in the schedule's order
// (schedule/pipeline_schedule.h), following Megatron's schedules.py and p2p_communication.py:
//
//   recv_forward     a new [s, b, h] buffer for the hidden state (torch.empty(...,
//                    requires_grad=True) in _communicate), kept in input_tensors until the
//                    micro-batch's backward returns;
//   forward_step     the stage's forward; its output is sent on and then deallocated
//                    (deallocate_output_tensor with deallocate_pipeline_outputs: out.data is
//                    replaced by a 1-element tensor; autograd keeps only its grad_fn);
//   recv_backward    a new buffer for the gradient of the sent output (the backward's seed);
//   backward_step    torch.autograd.backward from that gradient; the received hidden state's
//                    gradient (input_tensor.grad) is sent back and dropped.
//
// A forward's autograd graph (and what the forward decided for its ops: which tensors require
// grad, the plans, the state of its checkpoint regions) is put aside (stash_micro_batch) until its backward restores it, so
// every micro-batch in flight keeps its saved activations on the device, as on the real stage.
// Not modelled: the 1-element tensor left by deallocate_output_tensor (4 bytes, one 512-byte
// block per micro-batch in flight).
#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "schedule/interpreter.h"

namespace headroom::schedule_detail {

Interpreter::MicroBatchGraph Interpreter::stash_micro_batch() {
  MicroBatchGraph m;
  m.nodes = std::move(nodes_);
  m.buf_of = buf_of_;
  m.returned = std::move(returned_);
  m.graph_held = std::move(graph_held_);
  m.segment_saved = std::move(segment_saved_);
  m.segment_held = std::move(segment_held_);
  m.segment_incoming = std::move(segment_incoming_);
  m.segment_state = std::move(segment_state_);
  m.region_hooks_save = std::move(region_hooks_save_);
  m.closure_inputs = std::move(closure_inputs_);
  m.closure_rng = std::move(closure_rng_);
  m.requires_grad = std::move(requires_grad_);
  m.redirect = std::move(redirect_);
  m.storage = std::move(storage_);
  m.grad_plans = std::move(grad_plans_);
  m.plain_plans = std::move(plain_plans_);
  nodes_.clear();
  returned_.clear();
  graph_held_.clear();
  segment_saved_.clear();
  segment_held_.clear();
  segment_incoming_.clear();
  segment_state_.clear();
  region_hooks_save_.clear();
  closure_inputs_.clear();
  closure_rng_.clear();
  requires_grad_.clear();
  redirect_.clear();
  storage_.clear();
  grad_plans_.clear();
  plain_plans_.clear();
  return m;
}

void Interpreter::restore_micro_batch(MicroBatchGraph& m) {
  nodes_ = std::move(m.nodes);
  buf_of_ = std::move(m.buf_of);
  returned_ = std::move(m.returned);
  graph_held_ = std::move(m.graph_held);
  segment_saved_ = std::move(m.segment_saved);
  segment_held_ = std::move(m.segment_held);
  segment_incoming_ = std::move(m.segment_incoming);
  segment_state_ = std::move(m.segment_state);
  region_hooks_save_ = std::move(m.region_hooks_save);
  closure_inputs_ = std::move(m.closure_inputs);
  closure_rng_ = std::move(m.closure_rng);
  requires_grad_ = std::move(m.requires_grad);
  redirect_ = std::move(m.redirect);
  storage_ = std::move(m.storage);
  grad_plans_ = std::move(m.grad_plans);
  plain_plans_ = std::move(m.plain_plans);
}

void Interpreter::run_pipeline_order(int iteration) {
  const PipelineRun& pipe = o_.pipeline;
  HEADROOM_CHECK(!pipe.chunks.empty() && static_cast<int>(pipe.order.size()) == 2 * o_.micro_batches * static_cast<int>(pipe.chunks.size()),
                 "pipeline order does not match the micro-batches");
  std::map<std::pair<int, int>, MicroBatchGraph> in_flight;  // (chunk, micro-batch)
  for (const PipelineAction& a : pipe.order) {
    chunk_ = a.chunk;
    const PipelineChunk& chunk = pipe.chunks.at(static_cast<size_t>(a.chunk));
    const std::string where = pipe.chunks.size() > 1 ? " (chunk " + std::to_string(a.chunk) + ")" : "";
    if (a.forward) {
      BufferId received = kNone;
      if (chunk.received != kNone) {
        begin_step(Phase::Forward, iteration, a.micro, kNone, "p2p recv activation" + where);
        const Tensor& t = g_.tensor(chunk.received);
        received = new_buffer(t.bytes(), Category::Activations, buffer_name(t.name), kNone);
        alloc(received);
        ref(received);  // input_tensors[] until the backward returns
        buf_of_[static_cast<size_t>(chunk.received)] = received;
        end_step();
      }
      forward(iteration, a.micro, Phase::Forward);
      if (chunk.sends) {
        begin_step(Phase::Forward, iteration, a.micro, kNone, "p2p send activation (deallocate_output_tensor)" + where);
        auto it = std::find(returned_.begin(), returned_.end(), chunk.output);
        HEADROOM_CHECK(it != returned_.end(), "the sent hidden state is not an output of the chunk's forward");
        returned_.erase(it);
        unref(buf_of_[static_cast<size_t>(chunk.output)]);
        end_step();
      }
      MicroBatchGraph m = stash_micro_batch();
      m.received = received;
      HEADROOM_CHECK(in_flight.emplace(std::make_pair(a.chunk, a.micro), std::move(m)).second, "micro-batch forwarded twice");
    } else {
      auto it = in_flight.find({a.chunk, a.micro});
      HEADROOM_CHECK(it != in_flight.end(), "backward before its forward");
      const BufferId received = it->second.received;
      restore_micro_batch(it->second);
      in_flight.erase(it);
      backward(iteration, a.micro);
      if (received != kNone) {
        begin_step(Phase::Backward, iteration, a.micro, kNone, "p2p send gradient; drop the received activation" + where);
        unref(received);
        end_step();
      }
    }
  }
  chunk_ = -1;
  HEADROOM_CHECK(in_flight.empty(), "a micro-batch without its backward");
}

}  // namespace headroom::schedule_detail
