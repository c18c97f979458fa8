#include "frontends/onnx/onnx_model.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "frontends/onnx/onnx_const.h"
#include "frontends/onnx/onnx_image_list.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/suggest.h"

namespace headroom::onnx_import {
namespace {

using onnx::AttributeProto;
using onnx::TensorProto;

// The first line of a library message, without ONNX's "[ShapeInferenceError]" style prefixes'
// trailing context (node dumps span many lines).
std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line.empty() ? "(no message)" : line;
}

std::string quoted_list(const std::vector<std::string>& names, size_t max = 4) {
  std::string r;
  for (size_t i = 0; i < names.size() && i < max; ++i) r += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > max) r += " and " + std::to_string(names.size() - max) + " more";
  return r;
}

// Whether a tensor holds inline values for all its elements, in the field its type uses (ONNX's
// shape inference reads constant inputs such as Range's limits without checking).
bool has_inline_data(const TensorProto& t) {
  int64_t n = 1;
  for (int64_t d : t.dims()) n *= d;  // dims are checked before
  int64_t count = inline_value_count(t);
  return count >= 0 && count == n;
}

std::string dims_text(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? "," : "") + (s[i] < 0 ? std::string("?") : std::to_string(s[i]));
  return r + "]";
}

}  // namespace

// ---- reading ----------------------------------------------------------------------------------

std::string read_model_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw InputError("no such file");
  if (fs::is_directory(st)) throw InputError("is a directory, not an ONNX file");
  if (!fs::is_regular_file(st)) throw InputError("is not a regular file");
  uintmax_t size = fs::file_size(path, ec);
  if (ec) throw InputError("cannot read the file size: " + ec.message());
  if (size > static_cast<uintmax_t>(INT_MAX)) {
    throw InputError(
        "the file is " + std::to_string(size) +
        " bytes, over protobuf's 2 GB message limit; save the weights as external data "
        "(onnx.save_model(..., save_as_external_data=True))");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot open the file for reading");
  std::string bytes(static_cast<size_t>(size), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  if (static_cast<uintmax_t>(in.gcount()) != size)
    throw InputError("could not read the whole file");
  return bytes;
}

onnx::ModelProto parse_model(std::string_view bytes) {
  if (bytes.empty()) throw InputError("the file is empty, not an ONNX model");
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    throw InputError("over protobuf's 2 GB message limit");
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    throw InputError(
        "not an ONNX model: the bytes do not parse as an ONNX ModelProto (truncated or not "
        "protobuf)");
  }
  if (!model.has_graph()) throw InputError("not an ONNX model: the protobuf has no graph");
  return model;
}

// ---- element types ----------------------------------------------------------------------------

std::string elem_type_name(int32_t elem) {
  if (TensorProto::DataType_IsValid(elem))
    return TensorProto::DataType_Name(static_cast<TensorProto::DataType>(elem));
  return "type " + std::to_string(elem);
}

bool is_float_elem(int32_t elem) {
  return elem == TensorProto::FLOAT || elem == TensorProto::FLOAT16 ||
         elem == TensorProto::BFLOAT16 || elem == TensorProto::DOUBLE;
}

DType dtype_of(int32_t elem, const std::string& what) {
  switch (elem) {
    case TensorProto::FLOAT:
      return DType::F32;
    case TensorProto::FLOAT16:
      return DType::F16;
    case TensorProto::BFLOAT16:
      return DType::BF16;
    case TensorProto::DOUBLE:
      return DType::F64;
    case TensorProto::INT64:
      return DType::I64;
    case TensorProto::INT32:
      return DType::I32;
    case TensorProto::INT8:
      return DType::I8;
    case TensorProto::UINT8:
      return DType::U8;
    case TensorProto::BOOL:
      return DType::Bool;
    default:
      break;
  }
  throw InputError(what + " has element type " + elem_type_name(elem) +
                   ", which headroom does not model");
}

int64_t elem_size(int32_t elem) {
  switch (elem) {
    case TensorProto::FLOAT:
    case TensorProto::INT32:
    case TensorProto::UINT32:
      return 4;
    case TensorProto::DOUBLE:
    case TensorProto::INT64:
    case TensorProto::UINT64:
    case TensorProto::COMPLEX64:
      return 8;
    case TensorProto::COMPLEX128:
      return 16;
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16:
    case TensorProto::INT16:
    case TensorProto::UINT16:
      return 2;
    case TensorProto::INT8:
    case TensorProto::UINT8:
    case TensorProto::BOOL:
      return 1;
    default:
      return 0;
  }
}

// ---- attributes -------------------------------------------------------------------------------

const AttributeProto* NodeAttrs::find(std::string_view name) const {
  for (const AttributeProto& a : node_.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

const AttributeProto* NodeAttrs::typed(std::string_view name,
                                       AttributeProto::AttributeType type) const {
  const AttributeProto* a = find(name);
  if (a == nullptr) return nullptr;
  if (a->type() != type && a->type() != AttributeProto::UNDEFINED) {
    throw InputError("attribute '" + std::string(name) + "' is " +
                     AttributeProto::AttributeType_Name(a->type()) + ", expected " +
                     AttributeProto::AttributeType_Name(type));
  }
  if (a->type() == AttributeProto::UNDEFINED) {
    // IR version 1 files may leave the type out; accept only the field the caller reads.
    bool present = (type == AttributeProto::INT && a->has_i()) ||
                   (type == AttributeProto::FLOAT && a->has_f()) ||
                   (type == AttributeProto::STRING && a->has_s()) ||
                   (type == AttributeProto::TENSOR && a->has_t()) ||
                   (type == AttributeProto::INTS) || (type == AttributeProto::FLOATS);
    if (!present)
      throw InputError("attribute '" + std::string(name) + "' has no type and no value");
  }
  return a;
}

int64_t NodeAttrs::i(std::string_view name, int64_t fallback) const {
  const AttributeProto* a = typed(name, AttributeProto::INT);
  return a ? a->i() : fallback;
}

double NodeAttrs::f(std::string_view name, double fallback) const {
  const AttributeProto* a = typed(name, AttributeProto::FLOAT);
  return a ? a->f() : fallback;
}

std::string NodeAttrs::s(std::string_view name, const std::string& fallback) const {
  const AttributeProto* a = typed(name, AttributeProto::STRING);
  return a ? a->s() : fallback;
}

std::optional<std::vector<int64_t>> NodeAttrs::ints(std::string_view name) const {
  const AttributeProto* a = typed(name, AttributeProto::INTS);
  if (a == nullptr) return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::optional<std::vector<double>> NodeAttrs::floats(std::string_view name) const {
  const AttributeProto* a = typed(name, AttributeProto::FLOATS);
  if (a == nullptr) return std::nullopt;
  return std::vector<double>(a->floats().begin(), a->floats().end());
}

const TensorProto* NodeAttrs::t(std::string_view name) const {
  const AttributeProto* a = typed(name, AttributeProto::TENSOR);
  return a ? &a->t() : nullptr;
}

std::string node_label(const onnx::NodeProto& node, size_t index) {
  std::string who = node.name().empty() ? "#" + std::to_string(index) : "'" + node.name() + "'";
  return "node " + who + " (" + node.op_type() + ")";
}

// ---- structure --------------------------------------------------------------------------------

namespace {

// Kahn's algorithm over node dependencies: the nodes left when no node is ready lie on or behind
// a cycle. Returns the names of the first few of them.
std::vector<std::string> nodes_on_cycles(const onnx::GraphProto& g, const Structure& st) {
  const int n = g.node_size();
  std::vector<int> pending(static_cast<size_t>(n), 0);
  std::vector<std::vector<int>> next(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    for (const std::string& in : g.node(i).input()) {
      auto p = st.producer.find(in);
      if (in.empty() || p == st.producer.end()) continue;
      ++pending[static_cast<size_t>(i)];
      next[static_cast<size_t>(p->second)].push_back(i);
    }
  }
  std::vector<int> ready;
  for (int i = 0; i < n; ++i) {
    if (pending[static_cast<size_t>(i)] == 0) ready.push_back(i);
  }
  while (!ready.empty()) {
    int i = ready.back();
    ready.pop_back();
    for (int j : next[static_cast<size_t>(i)]) {
      if (--pending[static_cast<size_t>(j)] == 0) ready.push_back(j);
    }
  }
  std::vector<std::string> left;
  for (int i = 0; i < n; ++i) {
    if (pending[static_cast<size_t>(i)] > 0)
      left.push_back(g.node(i).name().empty() ? "#" + std::to_string(i) : g.node(i).name());
  }
  return left;
}

void check_value_info_is_tensor(const onnx::ValueInfoProto& v, const char* what) {
  if (!v.has_type() || v.type().value_case() != onnx::TypeProto::kTensorType) {
    throw InputError(std::string(what) + " '" + v.name() +
                     "' is not a tensor (sequences, maps and optionals are not supported)");
  }
  if (!v.type().tensor_type().has_elem_type() ||
      v.type().tensor_type().elem_type() == TensorProto::UNDEFINED) {
    throw InputError(std::string(what) + " '" + v.name() + "' has no element type");
  }
}

}  // namespace

void check_names(const onnx::GraphProto& g) {
  auto no_nul = [](const std::string& name, const char* what) {
    if (name.find('\0') != std::string::npos)
      throw InputError(std::string(what) + " name contains a NUL byte");
  };
  for (const onnx::NodeProto& n : g.node()) {
    no_nul(n.name(), "a node");
    no_nul(n.op_type(), "an op type");
    no_nul(n.domain(), "a domain");
    for (const std::string& x : n.input()) no_nul(x, "a tensor");
    for (const std::string& x : n.output()) no_nul(x, "a tensor");
    for (const onnx::AttributeProto& a : n.attribute()) no_nul(a.name(), "an attribute");
  }
  for (const TensorProto& t : g.initializer()) no_nul(t.name(), "an initializer");
  for (const onnx::ValueInfoProto& v : g.input()) no_nul(v.name(), "a graph input");
  for (const onnx::ValueInfoProto& v : g.output()) no_nul(v.name(), "a graph output");
}

void check_initializer(const TensorProto& t) {
  // Declared dims are all headroom reads of a weight: non-negative, and a byte size that fits.
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0) {
      std::string dims;
      for (int64_t x : t.dims()) dims += (dims.empty() ? "" : ",") + std::to_string(x);
      throw InputError("initializer '" + t.name() + "' has a negative dimension [" + dims + "]");
    }
    n = checked_mul(n, d, "the size of initializer '" + t.name() + "'");
  }
  checked_mul(n, std::max<int64_t>(1, elem_size(t.data_type())),
              "the bytes of initializer '" + t.name() + "'");
  decode_tensor(t, "initializer '" + t.name() + "'", 0);  // inline data, if any, matches the dims
}

Structure check_structure(const onnx::ModelProto& model) {
  const onnx::GraphProto& g = model.graph();
  Structure st;
  bool has_default = false;
  for (const onnx::OperatorSetIdProto& o : model.opset_import()) {
    if (is_default_domain(o.domain())) {
      st.opset = o.version();
      has_default = true;
    }
  }
  if (!has_default)
    throw InputError("the model imports no opset of the default ONNX domain (opset_import)");
  if (st.opset < 1)
    throw InputError("default-domain opset version " + std::to_string(st.opset) + " is not valid");
  if (g.node_size() == 0) throw InputError("the graph has no nodes");
  if (g.output_size() == 0) throw InputError("the graph has no outputs");

  std::unordered_map<std::string, std::string> defined;  // name -> what defines it
  auto define = [&](const std::string& name, const std::string& what) {
    if (name.empty()) throw InputError(what + " has an empty name");
    auto [it, fresh] = defined.emplace(name, what);
    if (!fresh)
      throw InputError("tensor '" + name + "' is defined twice: by " + it->second + " and by " +
                       what);
  };
  for (int i = 0; i < g.initializer_size(); ++i) {
    define(g.initializer(i).name(), "initializer '" + g.initializer(i).name() + "'");
    st.initializer.emplace(g.initializer(i).name(), i);
  }
  for (const TensorProto& t : g.initializer()) check_initializer(t);
  for (const onnx::SparseTensorProto& s : g.sparse_initializer()) {
    throw InputError("sparse initializer '" + s.values().name() + "' is not supported");
  }
  for (const onnx::ValueInfoProto& in : g.input()) {
    if (st.initializer.count(in.name())) continue;  // IR < 4 lists initializers as inputs too
    check_value_info_is_tensor(in, "graph input");
    define(in.name(), "graph input '" + in.name() + "'");
    st.inputs.push_back(in.name());
  }
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& node = g.node(i);
    for (const std::string& out : node.output()) {
      if (out.empty()) continue;  // an omitted optional output
      define(out, node_label(node, static_cast<size_t>(i)));
      st.producer.emplace(out, i);
    }
  }
  // Reads: defined, and (for node outputs) by an earlier node.
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& node = g.node(i);
    for (int slot = 0; slot < node.input_size(); ++slot) {
      const std::string& in = node.input(slot);
      if (in.empty()) continue;  // an omitted optional input
      if (!defined.count(in)) {
        throw InputError(node_label(node, static_cast<size_t>(i)) + " reads '" + in +
                         "', which is not a graph input, an initializer or any node's output (a "
                         "missing graph input?)");
      }
      auto p = st.producer.find(in);
      if (p != st.producer.end() && p->second >= i) {
        std::vector<std::string> cyc = nodes_on_cycles(g, st);
        if (!cyc.empty())
          throw InputError("the graph has a cycle through nodes " + quoted_list(cyc));
        throw InputError(node_label(node, static_cast<size_t>(i)) + " reads '" + in + "' before " +
                         node_label(g.node(p->second), static_cast<size_t>(p->second)) +
                         " produces it (nodes must be in topological order)");
      }
      st.consumers[in].emplace_back(i, slot);
    }
  }
  for (const onnx::ValueInfoProto& out : g.output()) {
    if (!defined.count(out.name())) {
      throw InputError("graph output '" + out.name() +
                       "' is not produced by any node, input or initializer");
    }
    ++st.output_uses[out.name()];
  }
  // Schemas of the default domain: counts of inputs and outputs, attribute types, required
  // attributes. (Shape inference assumes nodes that pass this.)
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& node = g.node(i);
    const std::string label = node_label(node, static_cast<size_t>(i));
    check_node_schema(node, label, st.opset);
    for (const onnx::AttributeProto& a : node.attribute()) {
      // If's branches and Loop's and Scan's bodies are resolved after binding
      // (onnx_control_flow.h).
      const bool branch =
          (node.op_type() == "If" || node.op_type() == "Loop" || node.op_type() == "Scan") &&
          is_default_domain(node.domain());
      if (!branch &&
          (a.type() == onnx::AttributeProto::GRAPH || a.type() == onnx::AttributeProto::GRAPHS)) {
        throw InputError(
            label + " has a subgraph (control flow other than If, Loop and Scan is not supported)");
      }
    }
  }
  return st;
}

void check_node_schema(const onnx::NodeProto& node, const std::string& label, int64_t opset) {
  if (!is_default_domain(node.domain())) return;
  const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(
      node.op_type(), static_cast<int>(std::min<int64_t>(opset, INT_MAX)), "");
  if (schema == nullptr) return;  // not an ONNX op at this opset: reported as unsupported later
  try {
    schema->Verify(node);
  } catch (const std::exception& e) {
    throw InputError(label + " does not match its ONNX schema (opset " + std::to_string(opset) +
                     "): " + first_line(e.what()));
  }
  for (const onnx::AttributeProto& a : node.attribute()) {
    // Constant values and tensor attributes are read as data: they must hold every element.
    if (a.has_t()) {
      const std::string what = label + " attribute '" + a.name() + "'";
      ConstTensor c = decode_tensor(a.t(), what, 0);
      if (!has_inline_data(a.t()))
        throw InputError(what + " does not hold its " + std::to_string(c.numel()) + " values");
    }
  }
}

// ---- symbolic dimensions ----------------------------------------------------------------------

namespace {

bool batch_like(const std::string& symbol) {
  std::string s;
  for (char c : symbol) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s == "n" || s == "b" || s == "bs" || s.find("batch") != std::string::npos;
}

// Names exporters give a sequence axis: dynamic_axes={"input_ids": {1: "seq"}}, "sequence_length",
// "seq_len", "num_tokens"...
bool sequence_like(const std::string& symbol) {
  std::string s;
  for (char c : symbol) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s == "t" || s == "s" || s == "l" || s.find("seq") != std::string::npos ||
         s.find("token") != std::string::npos || s.find("length") != std::string::npos;
}

void substitute(onnx::TypeProto* type, const std::map<std::string, int64_t>& values) {
  if (type->value_case() != onnx::TypeProto::kTensorType || !type->tensor_type().has_shape())
    return;
  for (onnx::TensorShapeProto_Dimension& d :
       *type->mutable_tensor_type()->mutable_shape()->mutable_dim()) {
    if (d.value_case() != onnx::TensorShapeProto_Dimension::kDimParam) continue;
    auto it = values.find(d.dim_param());
    if (it != values.end()) d.set_dim_value(it->second);
  }
}

}  // namespace

bool is_batch_symbol(const std::string& symbol) { return batch_like(symbol); }

DimBinding bind_dims(onnx::ModelProto& model, const Structure& st,
                     const OnnxImportOptions& options) {
  onnx::GraphProto* g = model.mutable_graph();
  DimBinding b;
  // Symbol -> the inputs that use it, in first-use order.
  std::vector<std::string> symbols;
  std::map<std::string, std::vector<std::string>> users;
  std::set<std::string> batch;
  std::unordered_map<std::string, const onnx::ValueInfoProto*> by_name;
  for (const onnx::ValueInfoProto& in : g->input()) by_name[in.name()] = &in;
  for (const std::string& name : st.inputs) {
    const onnx::ValueInfoProto& in = *by_name.at(name);
    if (!in.type().tensor_type().has_shape()) {
      throw InputError("graph input '" + name +
                       "' has no shape (export with input shapes, or add them with onnx tools)");
    }
    const auto& dims = in.type().tensor_type().shape().dim();
    for (int i = 0; i < dims.size(); ++i) {
      const auto& d = dims[i];
      if (d.value_case() == onnx::TensorShapeProto_Dimension::kDimValue) {
        if (d.dim_value() < 0) {
          throw InputError("graph input '" + name + "' dimension " + std::to_string(i) +
                           " is negative (" + std::to_string(d.dim_value()) + ")");
        }
        continue;
      }
      std::string sym =
          d.value_case() == onnx::TensorShapeProto_Dimension::kDimParam ? d.dim_param() : "";
      if (sym.empty()) {
        if (i != 0) {
          throw InputError(
              "graph input '" + name + "' dimension " + std::to_string(i) +
              " has neither a size nor a name; give it a name (dim_param) to bind it with --dim");
        }
        sym = "batch";  // an anonymous first dimension is the batch
        onnx::ValueInfoProto* mut = nullptr;
        for (onnx::ValueInfoProto& v : *g->mutable_input()) {
          if (v.name() == name) mut = &v;
        }
        mut->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(i)->set_dim_param(
            sym);
      }
      if (!users.count(sym)) symbols.push_back(sym);
      std::vector<std::string>& u = users[sym];
      if (std::find(u.begin(), u.end(), name) == u.end()) u.push_back(name);
      if (i == 0 || batch_like(sym)) batch.insert(sym);
    }
  }
  for (const auto& [name, value] : options.dims) {
    if (!users.count(name)) {
      std::string known = symbols.empty()
                              ? "it has none"
                              : "its symbolic dimensions are " + quoted_list(symbols, 8);
      throw InputError("--dim '" + name + "' is not a symbolic dimension of the model's inputs (" +
                       known + ")" + suggestion_suffix(name, symbols));
    }
    if (value <= 0)
      throw InputError("--dim " + name + "=" + std::to_string(value) + " must be positive");
  }
  if (options.batch && *options.batch <= 0) {
    throw InputError("batch must be positive, got " + std::to_string(*options.batch));
  }
  std::set<std::string> sequence;
  if (options.seq) {
    if (*options.seq <= 0) throw InputError("--seq must be positive, got " + std::to_string(*options.seq));
    for (const std::string& sym : symbols) {
      if (!batch.count(sym) && sequence_like(sym)) sequence.insert(sym);
    }
    if (sequence.empty()) {
      std::string known = symbols.empty() ? "it has none"
                                          : "its symbolic dimensions are " + quoted_list(symbols, 8);
      throw InputError("--seq: no symbolic dimension of the model's inputs is named like a sequence (" +
                       known + "); bind the right one with --dim NAME=N");
    }
  }
  std::vector<std::string> unbound;
  for (const std::string& sym : symbols) {
    auto d = options.dims.find(sym);
    if (d != options.dims.end()) {
      b.values[sym] = d->second;
    } else if (batch.count(sym) && options.batch) {
      b.values[sym] = *options.batch;
    } else if (sequence.count(sym)) {
      b.values[sym] = *options.seq;
    } else {
      unbound.push_back(sym);
    }
    if (batch.count(sym)) b.batch_symbols.push_back(sym);
  }
  if (!unbound.empty()) {
    std::string msg = "symbolic dimension";
    msg += unbound.size() > 1 ? "s " : " ";
    for (size_t i = 0; i < unbound.size(); ++i) {
      const std::vector<std::string>& u = users[unbound[i]];
      msg += (i ? "; '" : "'") + unbound[i] + "' (used by input" + (u.size() > 1 ? "s " : " ") +
             quoted_list(u) + (batch.count(unbound[i]) ? ", the batch axis" : "") + ")";
    }
    msg += unbound.size() > 1 ? " have no value" : " has no value";
    msg += batch.count(unbound[0])           ? ": pass --batch N or --dim " + unbound[0] + "=N"
           : sequence_like(unbound[0]) ? ": pass --seq N or --dim " + unbound[0] + "=N"
                                       : ": pass --dim " + unbound[0] + "=N";
    throw InputError(msg);
  }
  // Batch axes per input; a fixed-batch model asked for another batch cannot be re-batched.
  for (const std::string& name : st.inputs) {
    const auto& dims = by_name.at(name)->type().tensor_type().shape().dim();
    int axis = -1;
    for (int i = 0; i < dims.size() && axis < 0; ++i) {
      if (dims[i].value_case() == onnx::TensorShapeProto_Dimension::kDimParam &&
          batch.count(dims[i].dim_param()))
        axis = i;
    }
    b.batch_axis.push_back(axis);
  }
  if (options.batch && b.batch_symbols.empty() && !st.inputs.empty()) {
    const auto& dims = by_name.at(st.inputs[0])->type().tensor_type().shape().dim();
    if (std::optional<std::vector<int64_t>> image = image_list_input(*g, *by_name.at(st.inputs[0]))) {
      // One image of a list (torchvision's detection models): batch 1, no batch axis.
      const std::string what = image_list_text(st.inputs[0], *image);
      if (*options.batch != 1) {
        throw InputError("the model takes " + what + ", so it cannot run at batch " +
                         std::to_string(*options.batch) + "; use batch 1");
      }
      b.notes.push_back("the model takes " + what + ": batch 1");
    } else {
      int64_t fixed = dims.size() > 0 ? dims[0].dim_value() : -1;
      if (fixed != *options.batch) {
        throw InputError("the model has no symbolic batch axis (input '" + st.inputs[0] +
                         "' has a fixed first dimension " + std::to_string(fixed) +
                         "), so it cannot run at batch " + std::to_string(*options.batch) +
                         "; re-export with dynamic_axes or use batch " + std::to_string(fixed));
      }
      b.notes.push_back("the model has a fixed batch of " + std::to_string(fixed));
    }
  }
  for (onnx::ValueInfoProto& v : *g->mutable_input()) substitute(v.mutable_type(), b.values);
  for (onnx::ValueInfoProto& v : *g->mutable_output()) substitute(v.mutable_type(), b.values);
  for (onnx::ValueInfoProto& v : *g->mutable_value_info()) substitute(v.mutable_type(), b.values);
  return b;
}

// ---- shape inference --------------------------------------------------------------------------

bool InferredType::static_shape() const {
  return has_shape && std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d >= 0; });
}

namespace {

// ONNX 1.12's convolution shape inference takes the kernel size from the weight's shape and then
// indexes per-axis attributes sized by the input's rank, out of bounds when the two disagree. While
// inference runs, each convolution gets an explicit kernel_shape from its initializer weight (the
// attribute is checked against the input's rank), and a convolution whose weight is computed is
// moved to a private domain so inference skips it (headroom computes 2-D convolution shapes
// itself).
class GuardConvolutions {
 public:
  explicit GuardConvolutions(onnx::ModelProto& model) : model_(model) {
    onnx::GraphProto* g = model.mutable_graph();
    std::unordered_map<std::string, const TensorProto*> inits;
    for (const TensorProto& t : g->initializer()) inits[t.name()] = &t;
    for (onnx::NodeProto& n : *g->mutable_node()) {
      if (!is_default_domain(n.domain())) continue;
      const std::string& op = n.op_type();
      int w = op == "Conv" || op == "ConvTranspose" || op == "ConvInteger" ? 1
              : op == "QLinearConv"                                        ? 3
                                                                           : -1;
      if (w < 0) continue;
      bool has_kernel = false;
      for (const onnx::AttributeProto& a : n.attribute())
        has_kernel = has_kernel || a.name() == "kernel_shape";
      if (has_kernel) continue;
      auto it = w < n.input_size() ? inits.find(n.input(w)) : inits.end();
      if (it != inits.end() && it->second->dims_size() >= 2) {
        onnx::AttributeProto* a = n.add_attribute();
        a->set_name("kernel_shape");
        a->set_type(onnx::AttributeProto::INTS);
        for (int d = 2; d < it->second->dims_size(); ++d) a->add_ints(it->second->dims(d));
        added_.push_back(&n);
      } else {
        moved_.emplace_back(&n, n.domain());
        n.set_domain(kSkipDomain);
      }
    }
    if (!moved_.empty()) {
      auto* o = model_.add_opset_import();
      o->set_domain(kSkipDomain);
      o->set_version(1);
    }
  }
  ~GuardConvolutions() {
    for (onnx::NodeProto* n : added_) n->mutable_attribute()->RemoveLast();
    for (auto& [n, domain] : moved_) n->set_domain(domain);
    if (!moved_.empty()) model_.mutable_opset_import()->RemoveLast();
  }
  GuardConvolutions(const GuardConvolutions&) = delete;
  GuardConvolutions& operator=(const GuardConvolutions&) = delete;

 private:
  static constexpr const char* kSkipDomain = "headroom.skip-inference";
  onnx::ModelProto& model_;
  std::vector<onnx::NodeProto*> added_;
  std::vector<std::pair<onnx::NodeProto*, std::string>> moved_;
};

// Initializers without inline values (stripped or external weights) are shown to shape inference
// as graph inputs of their declared type and shape while it runs, then restored in their order.
class HideDatalessInitializers {
 public:
  explicit HideDatalessInitializers(onnx::GraphProto* g) : g_(g), inputs_(g->input_size()) {
    auto* inits = g_->mutable_initializer();
    all_.resize(static_cast<size_t>(inits->size()));
    inits->ExtractSubrange(0, inits->size(), all_.data());
    std::set<std::string> listed;
    for (const onnx::ValueInfoProto& v : g_->input()) listed.insert(v.name());
    for (TensorProto* t : all_) {
      if (has_inline_data(*t)) {
        inits->AddAllocated(t);
        continue;
      }
      if (listed.count(t->name())) continue;  // IR < 4: already a graph input
      onnx::ValueInfoProto* v = g_->add_input();
      v->set_name(t->name());
      auto* tt = v->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(t->data_type());
      auto* shape = tt->mutable_shape();
      for (int64_t d : t->dims()) shape->add_dim()->set_dim_value(d);
    }
  }
  ~HideDatalessInitializers() {
    auto* inits = g_->mutable_initializer();
    std::vector<TensorProto*> kept(static_cast<size_t>(inits->size()));
    inits->ExtractSubrange(0, inits->size(), kept.data());
    for (TensorProto* t : all_) inits->AddAllocated(t);
    g_->mutable_input()->DeleteSubrange(inputs_, g_->input_size() - inputs_);
  }
  HideDatalessInitializers(const HideDatalessInitializers&) = delete;
  HideDatalessInitializers& operator=(const HideDatalessInitializers&) = delete;

 private:
  onnx::GraphProto* g_;
  int inputs_;
  std::vector<TensorProto*> all_;
};

}  // namespace

TypeTable infer_types(onnx::ModelProto& model) {
  try {
    GuardConvolutions guard(model);
    HideDatalessInitializers hide(model.mutable_graph());
    // Lenient (error_mode 0): a node inference cannot handle keeps its declared shapes; the
    // lowering recomputes every shape under PyTorch's rules and compares (check_shapes), and
    // declared shapes that disagree with each other are caught below.
    onnx::ShapeInferenceOptions opts(/*check_type_val=*/false, /*strict_mode_val=*/0,
                                     /*data_prop_val=*/true);
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), opts);
  } catch (const std::exception& e) {
    std::string msg = first_line(e.what());
    bool contradiction = msg.find("existing shape differ") != std::string::npos ||
                         msg.find("Can't merge shape") != std::string::npos;
    throw InputError(
        std::string(contradiction ? "contradictory shapes: " : "shape inference failed: ") + msg);
  }
  TypeTable table;
  auto add = [&](const onnx::ValueInfoProto& v) {
    if (!v.has_type() || v.type().value_case() != onnx::TypeProto::kTensorType) return;
    const onnx::TypeProto_Tensor& t = v.type().tensor_type();
    InferredType it;
    it.elem = t.elem_type();
    it.has_shape = t.has_shape();
    for (const auto& d : t.shape().dim()) {
      it.dims.push_back(d.value_case() == onnx::TensorShapeProto_Dimension::kDimValue &&
                                d.dim_value() >= 0
                            ? d.dim_value()
                            : -1);
    }
    auto [slot, fresh] = table.emplace(v.name(), it);
    if (fresh) return;
    InferredType& known = slot->second;
    if (it.static_shape() && known.static_shape() && it.dims != known.dims) {
      throw InputError("contradictory shapes for '" + v.name() + "': " + dims_text(known.dims) +
                       " and " + dims_text(it.dims));
    }
    if (!known.static_shape() && it.has_shape) known = std::move(it);
  };
  for (const onnx::ValueInfoProto& v : model.graph().input()) add(v);
  for (const onnx::ValueInfoProto& v : model.graph().value_info()) add(v);
  for (const onnx::ValueInfoProto& v : model.graph().output()) add(v);
  return table;
}

bool is_default_domain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

}  // namespace headroom::onnx_import
