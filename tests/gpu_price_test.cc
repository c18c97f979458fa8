// Prices as data (cost/price_catalog.h) and fit's ranking of GPUs by cost, time or memory left
// (estimate/gpu_ranking.h). Price arithmetic by hand in the comments.
#include <gtest/gtest.h>

#include "cli_runner.h"
#include "cost/price_catalog.h"
#include "estimate/gpu_ranking.h"
#include "options/run_args.h"
#include "sim/device_catalog.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

TEST(GpuPrice, ArithmeticByHand) {
  // $2.00/h for 90 minutes (5,400,000 ms) = $3.00.
  EXPECT_DOUBLE_EQ(cost_usd(2.0, 5.4e6), 3.0);
  // $3.60/h = $0.001/s; at 1,000 samples/s, 1,000 samples take 1 s: $0.001 per 1k samples.
  EXPECT_DOUBLE_EQ(cost_per_units(3.6, 1000, 1000), 0.001);
  // 1M tokens at 20,000 tokens/s = 50 s at $1.80/h ($0.0005/s) = $0.025.
  EXPECT_NEAR(cost_per_units(1.8, 20000, 1e6), 0.025, 1e-15);
}

TEST(GpuPrice, CatalogNamesCatalogGpusWithDatesAndSources) {
  const PriceCatalog& c = PriceCatalog::builtin();
  ASSERT_GE(c.prices().size(), 10u);
  for (const GpuPrice& p : c.prices()) {
    EXPECT_NE(DeviceCatalog::builtin().try_find(p.gpu), nullptr) << p.gpu;
    EXPECT_GT(p.usd_per_hour, 0) << p.gpu;
    EXPECT_FALSE(p.date.empty() || p.source.empty() || p.provider.empty()) << p.gpu;
  }
  // T4: modal 0.5904 and replicate 0.81 are listed; the cheapest wins.
  std::optional<GpuPrice> t4 = c.cheapest("T4");
  ASSERT_TRUE(t4);
  EXPECT_EQ(t4->provider, "modal");
  EXPECT_DOUBLE_EQ(t4->usd_per_hour, 0.5904);
  EXPECT_FALSE(c.cheapest("V100-SXM2-16GB"));  // no listing: ranked without a price
}

TEST(GpuPrice, BadCatalogsAreInputErrors) {
  EXPECT_THROW(PriceCatalog::from_json("[]", "p.json"), InputError);
  EXPECT_THROW(PriceCatalog::from_json(R"({"prices": [{"gpu": "Z80", "provider": "x", "usd_per_hour": 1, "date": "d", "source": "s"}]})", "p.json"),
               InputError);
  EXPECT_THROW(PriceCatalog::from_json(R"({"prices": [{"gpu": "T4", "provider": "x", "usd_per_hour": 0, "date": "d", "source": "s"}]})", "p.json"),
               InputError);
}

TEST(GpuPrice, OverridesTakeAnyCatalogNameAndWin) {
  std::map<std::string, double> o = parse_price_overrides({"A100-80GB=1.99", "Tesla T4=0.35/h"});
  ASSERT_EQ(o.size(), 2u);
  EXPECT_DOUBLE_EQ(o.at("A100-SXM4-80GB"), 1.99);
  EXPECT_DOUBLE_EQ(o.at("T4"), 0.35);
  std::optional<GpuPrice> p = price_for("T4", o);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->provider, "--price");
  EXPECT_DOUBLE_EQ(p->usd_per_hour, 0.35);
  EXPECT_THROW(parse_price_overrides({"T4"}), InputError);
  EXPECT_THROW(parse_price_overrides({"T4=-1"}), InputError);
  EXPECT_THROW(parse_price_overrides({"T4=abc"}), InputError);
  EXPECT_THROW(parse_price_overrides({"Z80=1"}), InputError);
  EXPECT_THROW(parse_price_overrides({"T4=1", "Tesla T4=2"}), InputError);
}

// Two GPUs at batch 64 of a small MLP: each row's cost is its price / 3600 / throughput x 1000,
// and the order follows the objective.
TEST(GpuRanking, RowsFollowTheObjective) {
  std::vector<EstimateOptions> runs;
  std::vector<FitResult> fits;
  for (const char* name : {"T4", "L4"}) {
    RunArgs a;
    a.model = "mlp:layers=4,dim=512";
    a.batch = "64";
    a.batch_given = true;
    a.gpu = name;
    runs.push_back(to_estimate_options(a, RunCommand::Fit).value());
    FitResult f;
    f.gpu = name;
    f.max_value = 64;
    fits.push_back(f);
  }
  RankRequest req;
  req.batch_given = true;
  req.objective = Objective::Cost;
  req.price_overrides = {{"T4", 0.36}, {"L4", 0.72}};
  std::vector<RankedGpu> rows = rank_gpus(req, runs, fits).value();
  ASSERT_EQ(rows.size(), 2u);
  for (const RankedGpu& r : rows) {
    ASSERT_TRUE(r.fits && r.cost && r.price);
    EXPECT_EQ(r.batch, 64);
    EXPECT_EQ(r.cost_unit, "1k samples");
    EXPECT_NEAR(*r.cost, r.price->usd_per_hour / 3600 / r.throughput.value * 1000, 1e-15);
  }
  EXPECT_LE(*rows[0].cost, *rows[1].cost);
  req.objective = Objective::Time;
  rows = rank_gpus(req, runs, fits).value();
  EXPECT_GE(rows[0].throughput.value, rows[1].throughput.value);
  req.objective = Objective::Memory;
  rows = rank_gpus(req, runs, fits).value();
  EXPECT_GE(rows[0].headroom_bytes, rows[1].headroom_bytes);
}

TEST(GpuRankingCli, FitRanksEveryGpuAndExplainsErrors) {
  testing::CliRun r = testing::run_cli("fit mlp:layers=2,dim=256 --gpu all --objective cost --price T4=0.30 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"ranking\": {\n    \"objective\": \"cost\""), std::string::npos);
  EXPECT_NE(r.out.find("\"provider\": \"--price\""), std::string::npos);
  testing::CliRun t = testing::run_cli("fit mlp:layers=2,dim=256 --gpu all --objective time");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("ranked by throughput"), std::string::npos);
  testing::expect_usage_error("fit resnet18 --gpu all --objective speed", "--objective must be cost, time or memory");
  testing::expect_usage_error("fit resnet18 --gpu T4 --price T4=0.3", "--price applies with --objective cost");
  testing::expect_usage_error("fit resnet18 --gpu T4 --objective time --price T4=0.3", "--price applies with --objective cost");
  testing::expect_usage_error("fit resnet18 --gpu T4 --objective cost --price T4=free", "positive number of US dollars");
  testing::expect_usage_error("fit resnet18 --gpu-memory 16GiB --objective time", "--objective needs a catalog GPU");
  testing::expect_usage_error("fit resnet18 --gpu T4 --objective time --vary seq", "does not apply with --vary seq");
  testing::expect_usage_error("estimate resnet18 --objective cost", "--objective");
}

TEST(GpuRankingOptions, PythonKeywordsReachTheSameChecks) {
  RunArgs a;
  a.model = "resnet18";
  set_run_arg(a, "objective", "cost");
  Result<EstimateOptions> est = to_estimate_options(a);
  ASSERT_FALSE(est.ok());
  EXPECT_EQ(est.error(), "--objective applies to fit, not estimate");
  set_run_arg(a, "price", "T4=0.3");
  EXPECT_TRUE(to_estimate_options(a, RunCommand::Fit).ok());
  std::optional<RankRequest> r = to_rank_request(a);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->objective, Objective::Cost);
  EXPECT_DOUBLE_EQ(r->price_overrides.at("T4"), 0.3);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
