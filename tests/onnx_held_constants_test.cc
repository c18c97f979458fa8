// Large Constant nodes held as module buffers (frontends/onnx/onnx_lower.cc, "non-persistent
// buffers"): torch.onnx inlines a module's non-persistent buffers as Constant nodes and merges
// equal ones (GPT-2's twelve causal masks become one Constant read from twelve attention calls),
// while eager holds one per module. A Constant of 64 KiB or more is held once per module call
// (the reader's node-name scope) that reads it; a smaller one is not held.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "frontends/onnx/onnx_import.h"
#include "onnx_test_models.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using onnx::TensorProto;
using testing::OnnxModel;

// mask: fp32 [side, side]; y0 = Add(x, mask) in /h.0/attn, y1 = Add(y0, mask) in `second_call`.
OnnxModel two_readers(int64_t side, const std::string& second_call) {
  OnnxModel m;
  m.input("x", {int64_t{2}, side, side});
  TensorProto mask;
  mask.set_data_type(TensorProto::FLOAT);
  mask.add_dims(side);
  mask.add_dims(side);
  mask.set_raw_data(std::string(static_cast<size_t>(side * side * 4), '\0'));
  m.constant("mask", mask);
  m.node("Add", {"x", "mask"}, {"y0"}, "/m/h.0/attn/Add");
  m.node("Add", {"y0", "mask"}, {"y1"}, second_call + "/Add_1");
  m.output("y1");
  return m;
}

std::vector<std::pair<std::string, int64_t>> buffers(const OnnxModel& m) {
  Result<Graph> g = import_onnx_bytes(m.bytes(), OnnxImportOptions{}, "held.onnx");
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error());
  std::vector<std::pair<std::string, int64_t>> out;
  if (!g.ok()) return out;
  for (const Tensor& t : g.value().tensors) {
    if (t.role == TensorRole::Buffer) out.emplace_back(t.name, t.bytes());
  }
  return out;
}

using Buffers = std::vector<std::pair<std::string, int64_t>>;

TEST(OnnxHeldConstants, OneBufferPerModuleCallThatReadsTheConstant) {
  // 128 x 128 fp32 = 65,536 bytes, the threshold: held by /m/h.0/attn and by /m/h.1/attn.
  EXPECT_EQ(buffers(two_readers(128, "/m/h.1/attn")),
            (Buffers{{"mask of /m/h.0/attn", 65'536}, {"mask of /m/h.1/attn", 65'536}}));
}

TEST(OnnxHeldConstants, TwoReadsInOneCallHoldOneBuffer) {
  EXPECT_EQ(buffers(two_readers(128, "/m/h.0/attn")), (Buffers{{"mask of /m/h.0/attn", 65'536}}));
}

TEST(OnnxHeldConstants, ASmallConstantIsNotHeld) {
  // 127 x 127 x 4 = 64,516 bytes, under 64 KiB: folded shapes and scalars are not module buffers.
  EXPECT_EQ(buffers(two_readers(127, "/m/h.1/attn")), Buffers{});
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
