// headroom._native: the pybind11 binding of the C++ library for the Python package
// (python/headroom/). It exposes
//  - the run functions (estimate, fit, plan, report) taking the options as the CLI's keyword names
//    (options/run_args.h) and returning the CLI's JSON text, so that headroom.estimate(...) equals
//    `headroom estimate --json` by construction;
//  - pack over captured modules (headroom.pack): pack's JSON and each layer's weight names, which
//    python/headroom/gemel.py maps back onto the modules' parameters to merge them;
//  - GraphBuilder, through which recorder.py and lower.py write the graph of a captured nn.Module;
//  - the exceptions: Error, and InputError for the library's one-line input problems.
// The library never includes Python; this file is the only place the two meet.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "estimate/estimate.h"
#include "estimate/fit.h"
#include "estimate/fit_all.h"
#include "frontends/onnx/onnx_frontend_link.h"
#include "ir/builder.h"
#include "options/next_steps.h"
#include "options/run_args.h"
#include "pack/pack.h"
#include "pack/pack_report.h"
#include "pack/workload.h"
#include "plan/planner.h"
#include "report/estimate_report.h"
#include "report/fit_report.h"
#include "report/html_report.h"
#include "report/plan_report.h"
#include "sim/device_catalog.h"
#include "util/file.h"
#include "util/format.h"

namespace py = pybind11;

namespace headroom {
namespace {

// Python's error classes, made in PYBIND11_MODULE.
PyObject* g_input_error = nullptr;

template <typename T>
T unwrap(Result<T> r) {
  if (!r.ok()) throw InputError(r.error());
  return std::move(r).value();
}

// The options: a list of (name, value) pairs as text, in the order given; `captured` builds the
// graph of a captured module for a BuildConfig (None for zoo specs and ONNX files).
RunArgs to_run_args(const std::string& model, const std::vector<std::pair<std::string, std::string>>& options,
                    const py::object& captured) {
  RunArgs a;
  a.model = model;
  for (const auto& [name, value] : options) set_run_arg(a, name, value);
  if (!captured.is_none()) {
    py::function f = captured;
    a.captured = [f](const BuildConfig& c) -> Graph {
      py::object g = f(c.batch, c.seq ? py::cast(*c.seq) : py::none(), std::string(dtype_name(c.dtype)),
                       c.inference, c.dropout_scale, static_cast<int>(c.loss));
      return g.cast<Graph>();
    };
  }
  return a;
}

std::string estimate_json_text(const std::string& model, const std::vector<std::pair<std::string, std::string>>& options,
                               const py::object& captured) {
  EstimateOptions o = unwrap(to_estimate_options(to_run_args(model, options, captured)));
  return estimate_json(unwrap(estimate(o)));
}

std::string trace_text(const std::string& model, const std::vector<std::pair<std::string, std::string>>& options,
                       const py::object& captured) {
  RunArgs a = to_run_args(model, options, captured);
  a.keep_program = true;
  EstimateOptions o = unwrap(to_estimate_options(a));
  return program_trace(unwrap(estimate(o)).program);
}

std::string fit_json_text(const std::string& model, const std::vector<std::pair<std::string, std::string>>& options,
                          const py::object& captured, const std::string& vary) {
  RunArgs a = to_run_args(model, options, captured);
  a.vary = vary;  // a fixed-batch ONNX export refuses the batch search (model_source.h)
  if (a.mode == "serve") throw InputError("mode='serve' is the CLI's for now: headroom fit CONFIG --gpu NAME --mode serve --context N");
  EstimateOptions o = unwrap(to_estimate_options(a, RunCommand::Fit));
  if (vary != "batch" && vary != "seq") throw InputError("vary must be batch or seq, got '" + vary + "'");
  std::vector<std::string> gpus;
  if (a.gpu == "all") {
    for (const GpuSpec& g : DeviceCatalog::builtin().gpus()) gpus.push_back(g.name);
  } else {
    gpus.push_back(a.gpu);
  }
  std::optional<RankRequest> rank = to_rank_request(a);
  if (rank && vary != "batch") throw InputError("objective ranks GPUs by batch; it does not apply with vary='seq'");
  std::vector<GpuOptions> gpu_options;
  std::vector<EstimateOptions> runs;
  for (const std::string& name : gpus) {
    RunArgs one = a;
    one.gpu = name;
    EstimateOptions e = o;
    apply_gpu_args(one, e, /*required=*/true, /*gpu_all=*/true);
    gpu_options.push_back(*e.gpu);
    runs.push_back(e);
  }
  FitOptions f;
  f.estimate = o;
  f.axis = vary == "seq" ? FitAxis::Seq : FitAxis::Batch;
  std::vector<FitResult> results = unwrap(fit_all(f, gpu_options));
  std::optional<Ranking> ranking;
  if (rank) ranking = Ranking{rank->objective, unwrap(rank_gpus(*rank, runs, results))};
  return fit_json(o, results, next_steps_if_nothing_fits(a, results), ranking);
}

std::string plan_json_text(const std::string& model, const std::vector<std::pair<std::string, std::string>>& options,
                           const py::object& captured, const std::string& budget, const std::string& activation_budget,
                           const std::string& strategy, const std::string& cost_gpu) {
  PlanRequest req;
  RunArgs a = to_run_args(model, options, captured);
  if (!a.margin_given) a.margin = "0%";  // as the CLI: a plan's budget is the whole GPU unless asked
  req.run = unwrap(to_estimate_options(a, RunCommand::Plan));
  if (!budget.empty()) req.budget_bytes = parse_memory_size(budget);
  if (!activation_budget.empty()) req.activation_fraction = parse_fraction("--activation-budget", activation_budget);
  req.strategy = strategy;
  req.cost_gpu = cost_gpu;
  return plan_json(unwrap(make_plan(req)));
}

void report_file(const std::string& model, const std::vector<std::pair<std::string, std::string>>& options,
                 const py::object& captured, const std::string& path, const std::string& measured) {
  EstimateOptions o = unwrap(to_estimate_options(to_run_args(model, options, captured), RunCommand::Report));
  HtmlReportOptions ho;
  if (!measured.empty()) ho.measured = unwrap(read_watch_samples(measured));
  std::string html = unwrap(html_report(o, ho));
  (void)unwrap(write_file_atomically(path, html));
}

// `headroom pack` on models whose graphs come from Python: graphs[i](batch) builds model i's
// inference graph (a captured module, lowered). Returns pack's JSON text and, per model, each
// layer's name and weight names in pack's layer order (members refer to them by name).
using LayerWeights = std::vector<std::pair<std::string, std::vector<std::string>>>;
std::pair<std::string, std::vector<LayerWeights>> pack_captured(const std::vector<std::string>& names,
                                                                const std::vector<py::function>& graphs, int64_t batch,
                                                                const std::string& gpu, const std::string& gpu_memory,
                                                                const std::string& workload,
                                                                std::optional<int32_t> merged_groups) {
  if (names.size() != graphs.size()) throw InputError("pack: one graph builder per model name");
  PackOptions o;
  o.models = names;
  o.batch = batch;
  o.gpu = gpu;
  if (!gpu_memory.empty()) o.gpu_memory = parse_memory_size(gpu_memory);
  if (!workload.empty()) o.workload = unwrap(read_workload_file(workload));
  o.merged_groups = merged_groups;
  ModelLoader loader = [&](const std::string& name, int64_t b) {
    auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) throw InputError("pack: no model named '" + name + "'");
    py::object g = graphs[static_cast<size_t>(it - names.begin())](b);
    return loaded_from_graph(g.cast<Graph>());
  };
  PackReport r = unwrap(pack(o, loader));
  std::vector<LayerWeights> layers;
  for (const PackModel& m : r.models) {
    LayerWeights lw;
    for (const Layer& l : m.layers.layers) lw.emplace_back(l.name, l.weight_names);
    layers.push_back(std::move(lw));
  }
  return {pack_json(r), std::move(layers)};
}

DType to_dtype(const std::string& name) {
  std::optional<DType> d = parse_dtype(name);
  if (!d) throw InputError("unknown dtype '" + name + "'");
  return *d;
}

Window2d window(const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation, bool ceil_mode) {
  Window2d w;
  w.kernel_h = kernel.at(0);
  w.kernel_w = kernel.at(1);
  w.stride_h = stride.at(0);
  w.stride_w = stride.at(1);
  w.pad_top = w.pad_bottom = padding.at(0);
  w.pad_left = w.pad_right = padding.at(1);
  w.dilation_h = dilation.at(0);
  w.dilation_w = dilation.at(1);
  w.ceil_mode = ceil_mode;
  return w;
}

void bind_builder(py::module_& m) {
  py::class_<Graph>(m, "Graph")
      .def_property_readonly("parameter_count", &Graph::parameter_count)
      .def_property_readonly("weights_bytes", &Graph::weights_bytes)
      .def_property_readonly("op_count", [](const Graph& g) { return g.ops.size(); })
      .def("op_names", [](const Graph& g) {
        std::vector<std::string> names;
        for (const Op& op : g.ops) names.push_back(op.name);
        return names;
      });
  using B = GraphBuilder;
  py::class_<B>(m, "GraphBuilder")
      .def(py::init([](const std::string& model, const std::string& dtype) { return B(model, to_dtype(dtype)); }))
      .def("set_dim", &B::set_dim)
      .def("input", [](B& b, const std::string& n, std::vector<int64_t> s, const std::string& d, int axis) {
        return b.input(n, std::move(s), to_dtype(d), axis);
      })
      .def("target", [](B& b, const std::string& n, std::vector<int64_t> s, const std::string& d, int axis) {
        return b.target(n, std::move(s), to_dtype(d), axis);
      })
      .def("parameter", [](B& b, const std::string& n, std::vector<int64_t> s, const std::string& d) {
        return b.parameter(n, std::move(s), to_dtype(d));
      })
      .def("buffer", [](B& b, const std::string& n, std::vector<int64_t> s, const std::string& d) {
        return b.buffer(n, std::move(s), to_dtype(d));
      })
      .def("conv2d", [](B& b, const std::string& n, TensorId x, TensorId w, TensorId bias, std::vector<int64_t> stride,
                        std::vector<int64_t> padding, std::vector<int64_t> dilation, int64_t groups) {
        const std::vector<int64_t>& ws = b.shape(w);
        if (ws.size() != 4) throw InputError(n + ": conv2d weight must be 4-D, got " + shape_text(ws));
        return b.conv2d_with(n, x, w, bias, window({ws[2], ws[3]}, stride, padding, dilation, false), groups);
      })
      .def("conv_transpose2d", [](B& b, const std::string& n, TensorId x, TensorId w, TensorId bias,
                                  std::vector<int64_t> stride, std::vector<int64_t> padding,
                                  std::vector<int64_t> output_padding, std::vector<int64_t> dilation, int64_t groups) {
        const std::vector<int64_t>& ws = b.shape(w);
        if (ws.size() != 4) throw InputError(n + ": conv_transpose2d weight must be 4-D, got " + shape_text(ws));
        return b.conv_transpose2d_with(n, x, w, bias, window({ws[2], ws[3]}, stride, padding, dilation, false),
                                       std::move(output_padding), groups);
      })
      .def("batch_norm", &B::batch_norm_with)
      .def("layer_norm", &B::layer_norm_with)
      .def("linear", &B::linear_with)
      .def("embedding", &B::embedding_with)
      .def("relu", &B::relu)
      .def("hardtanh", &B::hardtanh)
      .def("gelu", &B::gelu)
      .def("tanh", &B::tanh)
      .def("sigmoid", &B::sigmoid)
      .def("silu", &B::silu)
      .def("add", &B::add)
      .def("add_", &B::add_)
      .def("sub", &B::sub)
      .def("mul", &B::mul)
      .def("div", &B::div)
      .def("add_scalar", &B::add_scalar)
      .def("mul_scalar", &B::mul_scalar)
      .def("div_scalar", &B::div_scalar)
      .def("softmax", &B::softmax)
      .def("log_softmax", &B::log_softmax)
      .def("matmul", &B::matmul)
      .def("mean_dims", &B::mean_dims)
      .def("sum_dims", &B::sum_dims)
      .def("max_pool2d", [](B& b, const std::string& n, TensorId x, std::vector<int64_t> k, std::vector<int64_t> s,
                            std::vector<int64_t> p, std::vector<int64_t> d, bool ceil) {
        return b.max_pool2d_with(n, x, window(k, s, p, d, ceil));
      })
      .def("avg_pool2d", [](B& b, const std::string& n, TensorId x, std::vector<int64_t> k, std::vector<int64_t> s,
                            std::vector<int64_t> p, bool ceil) {
        return b.avg_pool2d_with(n, x, window(k, s, p, {1, 1}, ceil));
      })
      .def("adaptive_avg_pool2d", &B::adaptive_avg_pool2d)
      .def("upsample2d", &B::upsample2d)
      .def("dropout", &B::dropout)
      .def("view", &B::view)
      .def("flatten", &B::flatten)
      .def("permute", &B::permute)
      .def("transpose", &B::transpose)
      .def("slice", &B::slice)
      .def("select", &B::select)
      .def("expand", &B::expand)
      .def("contiguous", &B::contiguous)
      .def("pad", &B::pad)
      .def("roll", &B::roll)
      .def("cat", &B::cat)
      .def("chunk", &B::chunk)
      .def("split", &B::split)
      .def("unsqueeze", &B::unsqueeze)
      .def("squeeze", &B::squeeze)
      .def("reshape", &B::reshape)
      .def("factory", [](B& b, const std::string& n, std::vector<int64_t> s, const std::string& d) {
        return b.factory(n, std::move(s), to_dtype(d));
      })
      // An elementwise call headroom has no op kind for (hardswish, hardsigmoid), or its in-place
      // form: an Opaque op with one output of x's shape and dtype (builder.h, opaque()).
      .def("elementwise_opaque", [](B& b, const std::string& n, TensorId x, bool inplace) {
        OpAttrs a;
        a.inplace = inplace;
        return b.opaque(n, {x}, {{b.shape(x), b.tensor(x).dtype}}, a)[0];
      })
      // Calls on tensors autograd never tracks (swin's shift mask): python/headroom/lower_attention.py.
      .def("compare", &B::compare)
      .def("masked_fill", &B::masked_fill)
      .def("index", &B::index)
      .def("begin_loss", &B::begin_loss)
      .def("cross_entropy", [](B& b, const std::string& n, TensorId l, TensorId t) { return b.cross_entropy(n, l, t); })
      .def("mse_loss", &B::mse_loss)
      .def("set_loss", &B::set_loss)
      .def("mark_output", &B::mark_output)
      .def("note", &B::note)
      .def("hold_until", &B::hold_until)
      .def("op_count", &B::op_count)
      .def("shape", &B::shape)
      .def("dtype", [](const B& b, TensorId t) { return std::string(dtype_name(b.tensor(t).dtype)); })
      .def("is_contiguous", &B::is_contiguous)
      .def("finish", &B::finish);
}

}  // namespace
}  // namespace headroom

PYBIND11_MODULE(_native, m) {
  using namespace headroom;
  m.doc() = "headroom's C++ library (use the headroom package, not this module)";
  // The extension links the ONNX importer: no plugin to find next to the interpreter.
  link_onnx_frontend();
  static py::exception<std::runtime_error> error(m, "Error", PyExc_Exception);
  static py::exception<InputError> input_error(m, "InputError", error.ptr());
  g_input_error = input_error.ptr();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InputError& e) {
      PyErr_SetString(g_input_error, e.what());
    }
  });
  m.def("estimate_json", &estimate_json_text, py::arg("model"), py::arg("options"), py::arg("captured"));
  m.def("trace_text", &trace_text, py::arg("model"), py::arg("options"), py::arg("captured"));
  m.def("fit_json", &fit_json_text, py::arg("model"), py::arg("options"), py::arg("captured"), py::arg("vary"));
  m.def("plan_json", &plan_json_text, py::arg("model"), py::arg("options"), py::arg("captured"), py::arg("budget"),
        py::arg("activation_budget"), py::arg("strategy"), py::arg("cost_gpu"));
  m.def("pack_json", &pack_captured, py::arg("names"), py::arg("graphs"), py::arg("batch"), py::arg("gpu"),
        py::arg("gpu_memory"), py::arg("workload"), py::arg("merged_groups"));
  m.def("report", &report_file, py::arg("model"), py::arg("options"), py::arg("captured"), py::arg("path"),
        py::arg("measured") = "");
  bind_builder(m);
}
