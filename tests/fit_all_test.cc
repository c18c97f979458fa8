// fit_all: the shared sweep over many GPUs gives, byte for byte, the report of fit() run on each
// GPU alone (the path it replaced), for the whole catalog and for the options that change what a
// GPU does to a run (cuBLAS workspace, allocator settings, capacity, context, margin), and the same
// first error.
#include <gtest/gtest.h>

#include <tuple>

#include "estimate/fit_all.h"
#include "frontends/model_source.h"
#include "report/fit_report.h"
#include "sim/device_catalog.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

std::vector<GpuOptions> catalog(const GpuOptions& base) {
  std::vector<GpuOptions> gpus;
  for (const GpuSpec& s : DeviceCatalog::builtin().gpus()) {
    GpuOptions g = base;
    g.gpu = s.name;
    gpus.push_back(g);
  }
  return gpus;
}

// fit() for each GPU, one after the other: the reference.
Result<std::vector<FitResult>> fit_each(const FitOptions& o, const std::vector<GpuOptions>& gpus) {
  std::vector<FitResult> out;
  for (const GpuOptions& g : gpus) {
    FitOptions f = o;
    f.estimate.gpu = g;
    Result<FitResult> r = fit(f);
    if (!r.ok()) return Result<std::vector<FitResult>>::failure(r.error());
    out.push_back(r.value());
  }
  return out;
}

void expect_same_reports(const FitOptions& o, const std::vector<GpuOptions>& gpus) {
  Result<std::vector<FitResult>> want = fit_each(o, gpus);
  Result<std::vector<FitResult>> got = fit_all(o, gpus);
  ASSERT_TRUE(want.ok()) << want.error();
  ASSERT_TRUE(got.ok()) << got.error();
  EXPECT_EQ(fit_json(o.estimate, got.value()), fit_json(o.estimate, want.value()));
  EXPECT_EQ(fit_text(o.estimate, got.value()), fit_text(o.estimate, want.value()));
}

FitOptions resnet18() {
  FitOptions f;
  f.estimate.model = "resnet18";
  f.estimate.optimizer = OptimizerKind::Sgd;
  return f;
}

TEST(FitAll, ResnetOnEveryCatalogGpuIsFitOnEach) {
  // Hopper and Blackwell GPUs build a program with a 32 MiB cuBLAS workspace, the others with
  // 8,519,680 bytes: both programs are shared, each by its own GPUs.
  GpuOptions g;
  g.margin = 0.05;
  expect_same_reports(resnet18(), catalog(g));
}

TEST(FitAll, AdamWithAnExplicitWorkspaceAndEagerContext) {
  FitOptions f = resnet18();
  f.estimate.model = "resnet50";
  f.estimate.optimizer = OptimizerKind::Adam;
  f.estimate.cublas_workspace_bytes = 0;  // one program for every GPU
  GpuOptions g;
  g.lazy_module_loading = false;
  g.nccl = true;
  expect_same_reports(f, catalog(g));
}

TEST(FitAll, AllocatorSettingsThatDependOnCapacity) {
  // max_split_size releases cached blocks when a segment does not fit (a replay that meets the
  // capacity); expandable segments size their address range from the capacity.
  GpuOptions split;
  split.allocator.max_split_size_bytes = 64LL << 20;
  expect_same_reports(resnet18(), catalog(split));
  GpuOptions expandable;
  expandable.allocator.expandable_segments = true;
  expect_same_reports(resnet18(), catalog(expandable));
  // Each GPU with its own settings in one call: replays are shared only between equal settings.
  std::vector<GpuOptions> mixed = catalog(GpuOptions{});
  for (size_t i = 0; i < mixed.size(); ++i) {
    if (i % 3 == 1) mixed[i].allocator = split.allocator;
    if (i % 3 == 2) mixed[i].allocator = expandable.allocator;
  }
  expect_same_reports(resnet18(), mixed);
}

TEST(FitAll, CustomCapacitiesNearTheLimitAndNothingFits) {
  // --gpu-memory without a name (device-default workspace) at sizes where the allocator meets the
  // capacity during the bisection, and one where even batch 1 does not fit.
  std::vector<GpuOptions> gpus;
  for (int64_t mib : {300, 1500, 3072, 3100, 5000}) {
    GpuOptions g;
    g.gpu_memory = mib << 20;
    g.margin = 0.05;
    gpus.push_back(g);
  }
  expect_same_reports(resnet18(), gpus);
}

TEST(FitAll, SequenceSearchOnGpt2) {
  FitOptions f;
  f.estimate.model = "gpt2";
  f.estimate.mode = RunMode::Inference;
  f.axis = FitAxis::Seq;
  std::vector<GpuOptions> gpus;
  for (const char* name : {"t4", "a100-80gb", "h100-sxm"}) {
    GpuOptions g;
    g.gpu = name;
    gpus.push_back(g);
  }
  expect_same_reports(f, gpus);
}

FitOptions hf_config(const std::string& file, RunMode mode) {
  FitOptions f;
  f.estimate.model = std::string(HEADROOM_SOURCE_DIR) + "/" + file;
  select_frontend(f.estimate, {});
  f.estimate.mode = mode;
  return f;
}

TEST(FitAll, TrainingInferenceAndGenerationAreFitOnEach) {
  GpuOptions g;
  g.margin = 0.05;
  FitOptions train;
  train.estimate.model = "gpt2";
  expect_same_reports(train, catalog(g));
  FitOptions infer = train;
  infer.estimate.mode = RunMode::Inference;
  expect_same_reports(infer, catalog(g));
  // Generation: each size is estimate()'s two windows, built again for each workspace.
  FitOptions gen = hf_config("validation/hf-configs/tiny-llama-gqa.json", RunMode::Inference);
  gen.estimate.generation = GenerationOptions{64, 16};
  gen.limit = 4096;
  std::vector<GpuOptions> small;
  for (int64_t mib : {400, 700}) {
    GpuOptions s;
    s.gpu_memory = mib << 20;
    small.push_back(s);
  }
  for (const char* name : {"T4", "H100-SXM"}) {
    GpuOptions s;
    s.gpu = name;
    small.push_back(s);
  }
  expect_same_reports(gen, small);
}

TEST(FitAll, PipelinedRunsAreSharedOnlyOnTheirOwnSmCounts) {
  // A pipelined run reports its highest stage, which the staging sizes can change: a program is
  // shared only by GPUs with its SM counts. These four all differ (the T4 and the A100 with
  // 8,519,680-byte workspaces, the H100 SXM and PCIe with 32 MiB), so each builds its own at
  // every size, and each report is fit()'s. The sequence is searched (up to gpt2's 1,024) at
  // batch 4 in micro-batches of 2.
  FitOptions pp;
  pp.estimate.model = "gpt2:layers=4";
  pp.estimate.precision = Precision::Bf16;
  pp.estimate.batch = 4;
  pp.estimate.micro_batch = 2;
  pp.estimate.parallel.gpus = 2;
  pp.estimate.parallel.pipeline_parallel = 2;
  pp.axis = FitAxis::Seq;
  std::vector<GpuOptions> gpus;
  for (const char* name : {"T4", "A100-SXM4-80GB", "H100-SXM", "H100-PCIe"}) {
    GpuOptions g;
    g.gpu = name;
    gpus.push_back(g);
  }
  expect_same_reports(pp, gpus);
  FitAllWork work;
  ASSERT_TRUE(fit_all(pp, gpus, {}, &work).ok());
  EXPECT_GT(work.programs, 0);
  EXPECT_EQ(work.resized, 0);
  EXPECT_EQ(work.shared, 0);
}

TEST(FitAll, NothingFitsAnywhereAndEverythingFitsEverywhere) {
  // Llama-3.1-70B trained in fp32 with Adam holds 16 bytes per parameter: past every catalog GPU
  // at batch 1, so each report is the footprint at batch 1.
  FitOptions big = hf_config("data/hf-configs/llama-3.1-70b.json", RunMode::Training);
  big.estimate.seq = 128;
  Result<std::vector<FitResult>> got = fit_all(big, catalog(GpuOptions{}));
  ASSERT_TRUE(got.ok()) << got.error();
  for (const FitResult& r : got.value()) EXPECT_EQ(r.max_value, 0) << r.gpu;
  expect_same_reports(big, catalog(GpuOptions{}));
  // resnet18 at batch 64 fits every catalog GPU: each search stops at the limit.
  FitOptions small = resnet18();
  small.limit = 64;
  got = fit_all(small, catalog(GpuOptions{}));
  ASSERT_TRUE(got.ok()) << got.error();
  for (const FitResult& r : got.value()) EXPECT_TRUE(r.limited) << r.gpu;
  expect_same_reports(small, catalog(GpuOptions{}));
}

TEST(FitAll, SimulatesLessThanTheLoopOverFit) {
  // bench/fit_bench.cc's workload: resnet50 training (Adam) on the 14 catalog GPUs, 5% margin.
  // The loop over fit() runs one whole estimate (graph, program, exact peak, replay) for each
  // evaluation of each GPU's search. fit_all builds each (size, workspace) once (the Hopper GPUs'
  // 32 MiB workspace reuses the program of the same size), simulates the exact peak only of the
  // points a report prints (at_max and next), and replays each program once without a limit plus
  // once per capacity that its unlimited replay passes and no bound rules out.
  FitOptions f;
  f.estimate.model = "resnet50";
  GpuOptions g;
  g.margin = 0.05;
  FitAllWork work;
  Result<std::vector<FitResult>> got = fit_all(f, catalog(g), {}, &work);
  ASSERT_TRUE(got.ok()) << got.error();
  int loop = 0;
  for (const FitResult& r : got.value()) loop += r.evaluations;
  // 14 searches of about 32 sizes each (doubling, bisection, the two reported points and the 16
  // sizes below the answer that fit() re-checks): 449 whole estimates in the loop.
  EXPECT_EQ(loop, 449);
  // 211 programs built; exact peaks only for the points printed (at_max and next of
  // 14 GPUs: 24 distinct); 243 replays, about one per program. These count work, not memory; the
  // measured CUDA rules of 2026-11-26 (the stack's context, estimate/cuda_context.h; Adam's one
  // foreach list; cudnn9's workspaces; PyTorch 2.x's autograd rules) moved the answers.
  EXPECT_EQ(work.programs, 211);
  // Of the other GPUs' requests for a size already built, 60 reuse it with the other workspace
  // (the Hopper GPUs' 32 MiB, by two SM counts: 132 and the H100 PCIe's 114) and 148 with the
  // same one on other SM counts. resnet50's one reduction, the fc bias (1,000 outputs) over the
  // batch, borrows from batch 1,024 on, but split by its values (ceil(batch / 64) blocks, 24 at
  // the H200's 1,492) under every GPU's grid (the T4's ceil(320 / 8) = 40): the same staging on
  // every GPU, so the same replays.
  EXPECT_EQ(work.resized, 60);
  EXPECT_EQ(work.shared, 148);
  EXPECT_EQ(work.exact_peaks, 24);
  EXPECT_EQ(work.replays, 243);
}

TEST(FitAll, GpusWhoseSmCountsStageAReductionDifferentlyShareResizedOrGetTheirOwnPrograms) {
  // The mlp's bias gradients (C = 1,024) stage by the SM count from batch 4,096 on (256 values
  // per thread after block.y) until the split by values outgrows every GPU's grid
  // (tests/cuda_reduce_test.cc works batch 16,384). Every GPU borrows there, each its own size:
  // the GPUs share each size's program with its staging buffers resized, and each set of sizes
  // is replayed (and its peak simulated) on its own. Against a sweep that gives every GPU the
  // H100's counts: the same programs, more replays. The reports are fit()'s on each GPU.
  FitOptions f;
  f.estimate.model = "mlp";
  f.estimate.optimizer = OptimizerKind::Adam;
  GpuOptions g;
  g.margin = 0.05;
  expect_same_reports(f, catalog(g));
  FitOptions h100 = f;
  h100.estimate.reduce_device = kMeasuredGpu;
  FitAllWork own, one;
  ASSERT_TRUE(fit_all(f, catalog(g), {}, &own).ok());
  ASSERT_TRUE(fit_all(h100, catalog(g), {}, &one).ok());
  EXPECT_EQ(own.programs, one.programs);
  EXPECT_GT(own.replays, one.replays);
  EXPECT_GT(own.shared, 0);
  EXPECT_EQ(one.shared, 0);

  // Inference has no backward, so nothing stages: every GPU's key is the workspace alone, and
  // the sweep does exactly the work of one on the H100's counts.
  f.estimate.mode = RunMode::Inference;
  h100.estimate.mode = RunMode::Inference;
  expect_same_reports(f, catalog(g));
  ASSERT_TRUE(fit_all(f, catalog(g), {}, &own).ok());
  ASSERT_TRUE(fit_all(h100, catalog(g), {}, &one).ok());
  EXPECT_EQ(std::tie(own.programs, own.resized, own.shared, own.exact_peaks, own.replays),
            std::tie(one.programs, one.resized, one.shared, one.exact_peaks, one.replays));
  f.estimate.mode = RunMode::Training;
  h100.estimate.mode = RunMode::Training;

  // With C = 3,001 (odd: one output per thread, 32 x 16 = 512 threads, grid.x = ceil(3,001 / 32)
  // = 94) the T4's target grid is 40 x (1,024 / 512) = 80 blocks: under 94, so it borrows
  // nothing where every other GPU (the L4's 58 x 3 = 174 and up) borrows from 4,096 rows on. Its
  // program there has fewer buffers: the T4 builds its own.
  f.estimate.model = "mlp:dim=3001,layers=2";
  h100.estimate.model = f.estimate.model;
  expect_same_reports(f, catalog(g));
  ASSERT_TRUE(fit_all(f, catalog(g), {}, &own).ok());
  ASSERT_TRUE(fit_all(h100, catalog(g), {}, &one).ok());
  EXPECT_GT(own.programs, one.programs);
}

TEST(FitAll, FirstErrorIsFitsError) {
  FitOptions f = resnet18();
  f.estimate.device = "cpu";
  GpuOptions g;
  std::vector<GpuOptions> gpus = catalog(g);
  Result<std::vector<FitResult>> want = fit_each(f, gpus);
  Result<std::vector<FitResult>> got = fit_all(f, gpus);
  ASSERT_FALSE(want.ok());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error(), want.error());
  EXPECT_EQ(got.error(), "--gpu needs --device cuda");

  // A generation run is refused before it is built: a GPU off CUDA is the first error, before
  // --seq (which a generation run refuses itself).
  f = FitOptions{};
  f.estimate.model = std::string(HEADROOM_SOURCE_DIR) + "/validation/hf-configs/tiny-llama-gqa.json";
  select_frontend(f.estimate, {});
  f.estimate.mode = RunMode::Inference;
  f.estimate.generation = GenerationOptions{8, 4};
  f.estimate.seq = 4;
  f.estimate.device = "cpu";
  want = fit_each(f, gpus);
  got = fit_all(f, gpus);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error(), want.error());
  EXPECT_EQ(got.error(), "--gpu needs --device cuda");

  f = resnet18();
  gpus[0].margin = 0.95;
  want = fit_each(f, gpus);
  got = fit_all(f, gpus);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error(), want.error());
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
