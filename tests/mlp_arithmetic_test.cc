// End to end on the smallest graphs, every byte derived by hand.
#include <gtest/gtest.h>

#include "estimate/estimate.h"
#include "graph_dsl.h"
#include "frontends/zoo/registry.h"

namespace headroom {
namespace {

EstimateOptions mlp_options(RunMode mode, OptimizerKind opt) {
  EstimateOptions o;
  o.model = "mlp:layers=1,dim=4";
  o.batch = 2;
  o.mode = mode;
  o.optimizer = opt;
  o.foreach = false;
  o.device = "cuda";
  // The arithmetic below is about tensors; library workspaces have their own test.
  o.cublas_workspace_bytes = 0;
  return o;
}

TEST(MlpArithmetic, OneLayerTrainingStepSgd) {
  // mlp:layers=1,dim=4, batch 2, fp32. Persistent: W 4x4x4 = 64, b 4x4 = 16, x 2x4x4 = 32,
  // target 32 -> 144.
  // forward: linear out 32 (saved by GELU) -> 176; GELU out 32 -> 208;
  //          MSE: the squared error is written into the loss's own storage (32, input-sized)
  //          -> 240, reduction temporary 32 -> 272 (forward peak), temporary freed -> 240.
  // backward: seed 4 (kept until backward returns) -> 244; MSE grad 32 -> 276;
  //           GELU grad 32 -> 308; MSE grad freed -> 276; linear out released -> 244;
  //           linear: dW 64 -> 308, db 16 -> 324 (peak).
  Result<Estimate> r = estimate(mlp_options(RunMode::Training, OptimizerKind::Sgd));
  ASSERT_TRUE(r.ok()) << r.error();
  const Estimate& e = r.value();
  EXPECT_EQ(e.weights_bytes, 80);
  EXPECT_EQ(e.input_bytes, 64);
  EXPECT_EQ(e.peak_bytes, 324);
  EXPECT_EQ(e.peak_phase, Phase::Backward);
  EXPECT_EQ(e.peak_op, "0");
  ASSERT_EQ(e.iterations.size(), 2u);
  EXPECT_EQ(e.iterations[1].peak_bytes, 324);
  // At the peak: activation gradients = seed 4 + GELU grad 32 + dW 64 + db 16 (dW and db are
  // retagged as gradients only when AccumulateGrad steals them, after the node).
  EXPECT_EQ(e.breakdown_at_peak[static_cast<size_t>(Category::Weights)], 80);
  EXPECT_EQ(e.breakdown_at_peak[static_cast<size_t>(Category::Inputs)], 64);
  EXPECT_EQ(e.breakdown_at_peak[static_cast<size_t>(Category::ActivationGradients)], 4 + 32 + 64 + 16);
  // The returned GELU output (32; MSE saved it) and the loss (32) are held by the training loop.
  EXPECT_EQ(e.breakdown_at_peak[static_cast<size_t>(Category::SavedActivations)], 32);
  EXPECT_EQ(e.breakdown_at_peak[static_cast<size_t>(Category::Activations)], 32);
}

TEST(MlpArithmetic, OneLayerInference) {
  // Persistent: weights 80 + input 32 = 112 (no target in inference).
  // linear out 32 -> 144; GELU out 32 -> 176 (peak); linear out freed -> 144.
  Result<Estimate> r = estimate(mlp_options(RunMode::Inference, OptimizerKind::Sgd));
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().peak_bytes, 176);
  EXPECT_EQ(r.value().peak_phase, Phase::Inference);
  EXPECT_EQ(r.value().peak_op, "1");
}

TEST(MlpArithmetic, AdamSingleTensorStepOne) {
  // After backward (outputs, loss and seed dropped): 144 persistent + grads 80 = 224.
  // Adam state on step 1, for every parameter first: exp_avg + exp_avg_sq (`step` is a CPU
  // tensor on CUDA, torch.tensor(0.)): W: 64 + 64, b: 16 + 16 -> 160 -> 384.
  // Update of W: sqrt 64 + denom 64 -> 512 (peak); sqrt freed -> 448;
  // update of b: sqrt 16 -> 464, denom 16 -> 480; sqrt freed; W's denom freed.
  Result<Estimate> r = estimate(mlp_options(RunMode::Training, OptimizerKind::Adam));
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().peak_bytes, 512);
  EXPECT_EQ(r.value().peak_phase, Phase::Optimizer);
}

TEST(MlpArithmetic, AdamOnCpuAddsRecordFunctionAndSeesTheSameUpdate) {
  // Same as above on the CPU profile, where the `step` tensors (4 each) are device memory
  // (state 168 -> 392) and step() and zero_grad() each first allocate a record_function handle
  // (4) and holder (288). The update peaks at 392 + 128 = 520, but zero_grad() opens its scope
  // while grads and state are alive:
  // 144 persistent + 80 grads + 168 state + 292 = 684.
  EstimateOptions o = mlp_options(RunMode::Training, OptimizerKind::Adam);
  o.device = "cpu";
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().peak_bytes, 684);
  EXPECT_EQ(r.value().peak_op, "zero_grad(set_to_none=True)");
}

TEST(MlpArithmetic, AdamForeachHoldsOneParameterSizedList) {
  // PyTorch 2.x's foreach (the cuda profile): state as above -> 384; the exp_avg_sq_sqrt list,
  // divided and shifted by eps in place, 64 + 16 -> 464 (step 1's peak). Step 2's backward,
  // with the 160 bytes of state held, now peaks higher: 324 + 160 = 484.
  EstimateOptions o = mlp_options(RunMode::Training, OptimizerKind::Adam);
  o.foreach = true;
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r.value().iterations.size(), 2u);
  EXPECT_EQ(r.value().iterations[0].peak_bytes, 464);
  EXPECT_EQ(r.value().iterations[0].peak_phase, Phase::Optimizer);
  EXPECT_EQ(r.value().peak_bytes, 484);
  EXPECT_EQ(r.value().peak_phase, Phase::Backward);
  // PyTorch 1.13's second list (denom = _foreach_add(sqrt, eps)) is pinned on the cpu profile
  // in optimizer_rules_test.cc.
}

TEST(MlpArithmetic, MomentumCreatesOneBufferPerParameterOnStepOne) {
  // After backward: 224. momentum_buffer = clone(grad): 64 + 16 -> 304; step 2 adds nothing.
  // The backward peak (324) stays the largest.
  Result<Estimate> r = estimate(mlp_options(RunMode::Training, OptimizerKind::Momentum));
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r.value().iterations.size(), 2u);
  // Step 2 carries the 80 bytes of momentum buffers through its backward: 324 + 80 = 404.
  EXPECT_EQ(r.value().iterations[0].peak_bytes, 324);
  EXPECT_EQ(r.value().iterations[1].peak_bytes, 404);
  EXPECT_EQ(r.value().peak_bytes, 404);
}

TEST(MlpArithmetic, GradientAccumulationKeepsGradientsBetweenMicroBatches) {
  // batch 4 in micro-batches of 2: the graph runs at batch 2 twice. Second backward: dW and db
  // are added in place into the grads kept from the first (80 resident), so the backward peak is
  // 324 + 80 = 404 (a new dW/db is allocated, then dropped by AccumulateGrad).
  EstimateOptions o = mlp_options(RunMode::Training, OptimizerKind::Sgd);
  o.batch = 4;
  o.micro_batch = 2;
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().peak_bytes, 404);
  EXPECT_EQ(r.value().micro_batches, 2);
}

TEST(MlpArithmetic, ZeroGradZerosKeepsGradientsIntoTheNextStep) {
  // zero_grad(set_to_none=False): step 1 is unchanged (peak 324, backward) but dW 64 + db 16 = 80
  // stay allocated. Step 2 starts at 144 + 80 = 224: its forward peaks at 272 + 80 = 352; in its
  // backward a new dW and db are allocated (324 + 80 = 404) and AccumulateGrad adds them in place
  // into the kept ones, then drops them. SGD without momentum allocates nothing in step().
  EstimateOptions o = mlp_options(RunMode::Training, OptimizerKind::Sgd);
  o.zero_grad = ZeroGrad::Zeros;
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  const Estimate& e = r.value();
  ASSERT_EQ(e.iterations.size(), 2u);
  EXPECT_EQ(e.iterations[0].peak_bytes, 324);
  EXPECT_EQ(e.iterations[1].peak_bytes, 404);
  EXPECT_EQ(e.iterations[1].peak_phase, Phase::Backward);
  auto forward_peak = [](const IterationSummary& it) {
    for (const PhasePeak& p : it.phases) {
      if (p.phase == Phase::Forward) return p.bytes;
    }
    return int64_t{-1};
  };
  EXPECT_EQ(forward_peak(e.iterations[0]), 272);
  EXPECT_EQ(forward_peak(e.iterations[1]), 352);
  EXPECT_EQ(e.peak_bytes, 404);
  EXPECT_EQ(e.breakdown_at_peak[static_cast<size_t>(Category::Gradients)], 80);
  // The default frees them: step 2 repeats step 1.
  o.zero_grad = ZeroGrad::SetToNone;
  Result<Estimate> freed = estimate(o);
  ASSERT_TRUE(freed.ok()) << freed.error();
  EXPECT_EQ(forward_peak(freed.value().iterations[1]), 272);
  EXPECT_EQ(freed.value().peak_bytes, 324);
}

TEST(MlpArithmetic, EveryBuiltinProgramPassesTheOracles) {
  for (const ZooEntry& z : zoo()) {
    for (RunMode mode : {RunMode::Inference, RunMode::Training}) {
      EstimateOptions o;
      o.model = z.name;
      o.batch = 2;
      o.mode = mode;
      Graph g = build_graph(o, 2);
      Program p = build_program(g, schedule_options(o));
      EXPECT_EQ(testing::check_oracles(p), "") << z.name;
    }
  }
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

TEST(MlpArithmetic, AutocastInferenceCastsOperandsAndCachesWeights) {
  // amp-fp16 inference, mlp:layers=1,dim=4, batch 2. Persistent fp32: W 64 + b 16 + x 32 = 112.
  // linear runs in fp16: x cast 16 -> 128, W cast 32 (cached) -> 160, b cast 8 (cached) -> 168,
  // output fp16 16 -> 184 (peak); x's cast freed -> 168. GELU keeps fp16: 16 -> 184; the linear
  // output is freed -> 168. The cached weight casts live until the autocast region ends.
  EstimateOptions o;
  o.model = "mlp:layers=1,dim=4";
  o.batch = 2;
  o.mode = RunMode::Inference;
  o.precision = Precision::AmpFp16;
  o.cublas_workspace_bytes = 0;
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().peak_bytes, 184);
  EXPECT_EQ(r.value().peak_op, "0");
}

TEST(MlpArithmetic, AutocastTrainingKeepsFp32GradientsAndState) {
  // Whatever the activations' width, parameter gradients are fp32 (80 bytes) when the
  // optimizer runs, and Adam's state is fp32: 2 x 80 (the `step` tensors are on the CPU).
  EstimateOptions o;
  o.model = "mlp:layers=1,dim=4";
  o.batch = 2;
  o.optimizer = OptimizerKind::Adam;
  o.foreach = false;
  o.precision = Precision::AmpFp16;
  o.cublas_workspace_bytes = 0;
  Graph g = build_graph(o, 2);
  Program p = build_program(g, schedule_options(o));
  SimResult sim = simulate(p);
  Estimate e = summarize(o, g, p, sim);
  ASSERT_EQ(e.peak_phase, Phase::Optimizer);
  EXPECT_EQ(e.breakdown_at_peak[static_cast<size_t>(Category::Gradients)], 80);
  EXPECT_EQ(e.breakdown_at_peak[static_cast<size_t>(Category::OptimizerState)], 160);
}

TEST(MlpArithmetic, Bf16StoresEverythingInHalfWidth) {
  // Pure bf16: weights 40 (20 params x 2), input 16, target 16. Inference peak: 40 + 16 +
  // linear out 16 + GELU out 16 = 88.
  EstimateOptions o;
  o.model = "mlp:layers=1,dim=4";
  o.batch = 2;
  o.mode = RunMode::Inference;
  o.precision = Precision::Bf16;
  o.cublas_workspace_bytes = 0;
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().weights_bytes, 40);
  EXPECT_EQ(r.value().peak_bytes, 88);
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

TEST(MlpArithmetic, CublasWorkspacesOnePerThreadAreKept) {
  // CUDA default: the first cuBLAS call of the forward (main thread) creates an 8,519,680-byte
  // workspace (4096*1024*2 + 16*1024*8), the first of the backward (autograd thread) a second;
  // the forward's biased Linear runs through cublasLt, whose 1,048,576-byte workspace the main
  // thread keeps too (the backward's mm calls take none).
  // Training peak of OneLayerTrainingStepSgd: 324 + 2 * 8,519,680 + 1,048,576 = 18,088,260.
  // Inference: 176 + 8,519,680 + 1,048,576 = 9,568,432.
  EstimateOptions o;
  o.model = "mlp:layers=1,dim=4";
  o.batch = 2;
  o.optimizer = OptimizerKind::Sgd;
  o.foreach = false;
  Result<Estimate> t = estimate(o);
  ASSERT_TRUE(t.ok()) << t.error();
  EXPECT_EQ(t.value().peak_bytes, 18088260);
  EXPECT_EQ(t.value().breakdown_at_peak[static_cast<size_t>(Category::Workspaces)], 2 * 8519680 + 1048576);
  o.mode = RunMode::Inference;
  Result<Estimate> i = estimate(o);
  ASSERT_TRUE(i.ok()) << i.error();
  EXPECT_EQ(i.value().peak_bytes, 9568432);
}

TEST(MlpArithmetic, ConvWorkspaceFollowsThePolicy) {
  // resnet18 at batch 1, inference, no cuBLAS workspace. With the Fixed policy of 64 MiB every
  // convolution borrows 67,108,864 bytes while it runs: the peak now sits inside a convolution,
  // holds exactly one workspace, and is at most the None policy's peak + 64 MiB and at least
  // weights + input + 64 MiB.
  EstimateOptions o;
  o.model = "resnet18";
  o.batch = 1;
  o.mode = RunMode::Inference;
  o.cublas_workspace_bytes = 0;
  o.conv_workspace = ConvWorkspace::None;
  Result<Estimate> none = estimate(o);
  o.conv_workspace = ConvWorkspace::Fixed;
  o.conv_workspace_bytes = 64 << 20;
  Result<Estimate> fixed = estimate(o);
  ASSERT_TRUE(none.ok() && fixed.ok());
  const Estimate& f = fixed.value();
  EXPECT_EQ(none.value().breakdown_at_peak[static_cast<size_t>(Category::Workspaces)], 0);
  EXPECT_EQ(f.breakdown_at_peak[static_cast<size_t>(Category::Workspaces)], 64 << 20);
  EXPECT_LE(f.peak_bytes, none.value().peak_bytes + (64 << 20));
  EXPECT_GE(f.peak_bytes, f.weights_bytes + f.input_bytes + (64 << 20));
}

}  // namespace
}  // namespace headroom
