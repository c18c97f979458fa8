// The `headroom` command: parses arguments, calls the library, prints. Every user error is one
// line on stderr and exit code 2, with nothing on stdout.
#include <unistd.h>

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "estimate/estimate.h"
#include "frontends/zoo/registry.h"
#include "report/estimate_report.h"
#include "report/format.h"

namespace headroom {
namespace {

constexpr int kUsageError = 2;

int fail(const std::string& message) {
  std::cerr << "headroom: " << message << "\n";
  return kUsageError;
}

bool color_enabled() {
  return isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr;
}

// A positive integer option, parsed strictly: "abc", "-3", "1e3" and values past 64 bits are
// errors that name the option.
int64_t parse_positive(const std::string& option, const std::string& text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) throw InputError(option + " " + text + " does not fit in 64 bits");
  if (ec != std::errc() || end != text.data() + text.size() || v <= 0) {
    throw InputError(option + " must be a positive integer, got '" + text + "'");
  }
  return v;
}

struct EstimateArgs {
  std::string model;
  std::string batch = "1";
  std::string seq;
  std::string mode = "train";
  std::string optimizer = "adam";
  bool foreach = false;
  bool no_foreach = false;
  std::string precision = "fp32";
  std::string micro_batch;
  std::string device = "cuda";
  std::string dropout = "on";
  std::string loss = "default";
  bool json = false;
  bool trace = false;
  int top = 10;
};

void add_estimate_options(CLI::App* cmd, EstimateArgs& a) {
  cmd->add_option("MODEL", a.model, "built-in model, e.g. resnet50 or mlp:layers=16,dim=1024")->required();
  cmd->add_option("--batch", a.batch, "batch size (default 1)");
  cmd->add_option("--seq", a.seq, "sequence length for sequence models");
  cmd->add_option("--mode", a.mode, "infer or train (default train)");
  cmd->add_option("--optimizer", a.optimizer, "sgd, momentum, adam or adamw (default adam)");
  cmd->add_flag("--foreach", a.foreach, "use the optimizer's foreach (multi-tensor) implementation");
  cmd->add_flag("--no-foreach", a.no_foreach, "use the single-tensor implementation");
  cmd->add_option("--precision", a.precision, "fp32, amp-fp16, amp-bf16 or bf16 (default fp32)");
  cmd->add_option("--micro-batch", a.micro_batch, "gradient accumulation: forward/backward at this size");
  cmd->add_option("--device", a.device, "cuda or cpu kernels' memory behaviour (default cuda)");
  cmd->add_option("--dropout", a.dropout, "on or off (off: every dropout is identity)");
  cmd->add_option("--loss", a.loss, "cross-entropy, next-token or mse (default: the model's)");
  cmd->add_option("--top", a.top, "how many of the largest buffers at the peak to list (default 10)");
  cmd->add_flag("--json", a.json, "print one JSON object");
  cmd->add_flag("--trace", a.trace, "print every simulated allocation and free (for comparing with a measured trace)");
}

Result<EstimateOptions> to_options(const EstimateArgs& a, const CLI::App* cmd) {
  return capture_input_errors([&]() -> EstimateOptions {
    EstimateOptions o;
    o.model = a.model;
    o.batch = parse_positive("--batch", a.batch);
    if (cmd->count("--seq")) o.seq = parse_positive("--seq", a.seq);
    if (a.mode == "train") o.mode = RunMode::Training;
    else if (a.mode == "infer") o.mode = RunMode::Inference;
    else throw InputError("--mode must be infer or train, got '" + a.mode + "'");
    auto opt = parse_optimizer(a.optimizer);
    if (!opt) throw InputError("--optimizer must be sgd, momentum, adam or adamw, got '" + a.optimizer + "'");
    o.optimizer = *opt;
    if (a.foreach && a.no_foreach) throw InputError("--foreach and --no-foreach contradict each other");
    if (a.foreach) o.foreach = true;
    if (a.no_foreach) o.foreach = false;
    auto prec = parse_precision(a.precision);
    if (!prec) throw InputError("--precision must be fp32, amp-fp16, amp-bf16 or bf16, got '" + a.precision + "'");
    o.precision = *prec;
    if (cmd->count("--micro-batch")) o.micro_batch = parse_positive("--micro-batch", a.micro_batch);
    if (a.device != "cuda" && a.device != "cpu") throw InputError("--device must be cuda or cpu, got '" + a.device + "'");
    o.device = a.device;
    if (a.dropout == "on") o.dropout = true;
    else if (a.dropout == "off") o.dropout = false;
    else throw InputError("--dropout must be on or off, got '" + a.dropout + "'");
    if (a.loss == "default") o.loss = LossKind::Default;
    else if (a.loss == "cross-entropy") o.loss = LossKind::CrossEntropy;
    else if (a.loss == "next-token") o.loss = LossKind::NextToken;
    else if (a.loss == "mse") o.loss = LossKind::Mse;
    else throw InputError("--loss must be cross-entropy, next-token or mse, got '" + a.loss + "'");
    if (a.top < 0) throw InputError("--top must not be negative");
    o.top_tensors = a.top;
    o.keep_program = a.trace;
    return o;
  });
}

int run_estimate(const EstimateArgs& a, const CLI::App* cmd) {
  Result<EstimateOptions> o = to_options(a, cmd);
  if (!o.ok()) return fail(o.error());
  Result<Estimate> e = estimate(o.value());
  if (!e.ok()) return fail(e.error());
  if (a.trace) {
    std::cout << program_trace(e.value().program);
    return 0;
  }
  std::cout << (a.json ? estimate_json(e.value()) : estimate_text(e.value(), color_enabled()));
  return 0;
}

int run_models() {
  std::cout << fmt::format("{:<16} {:>16}  {}\n", "model", "parameters", "description");
  for (const ZooEntry& z : zoo()) {
    BuildConfig cfg;
    Graph g = z.build(ModelSpec{z.name, {}}, cfg);
    std::cout << fmt::format("{:<16} {:>16}  {}\n", z.name, with_commas(g.parameter_count()), z.description);
  }
  return 0;
}

int main_impl(int argc, char** argv) {
  CLI::App app{"headroom: how much GPU memory a model needs, before you run it"};
  app.require_subcommand(1);
  EstimateArgs ea;
  CLI::App* est = app.add_subcommand("estimate", "peak memory of inference or a training step");
  add_estimate_options(est, ea);
  CLI::App* models = app.add_subcommand("models", "list the built-in models");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    if (msg.empty()) msg = "invalid arguments (see headroom --help)";
    return fail(msg);
  }
  if (*est) return run_estimate(ea, est);
  if (*models) return run_models();
  return fail("no command (see headroom --help)");
}

}  // namespace
}  // namespace headroom

int main(int argc, char** argv) {
  try {
    return headroom::main_impl(argc, argv);
  } catch (const headroom::InputError& e) {
    return headroom::fail(e.what());
  } catch (const std::exception& e) {
    std::cerr << "headroom: internal error: " << e.what() << "\n";
    return 3;
  }
}
