#include "frontends/onnx/onnx_weights.h"

#include <onnx/onnx_pb.h>

#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "frontends/onnx/onnx_model.h"
#include "util/hash.h"

namespace headroom {
namespace {

namespace fs = std::filesystem;
using onnx::TensorProto;
using onnx_import::elem_size;
using onnx_import::is_float_elem;

constexpr int64_t kChunk = 1 << 20;

// A skipped tensor: thrown inside one tensor's read, caught by the loop, recorded as missing.
struct Skip {
  std::string why;
};

std::optional<int64_t> decimal(const std::string& text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0) return std::nullopt;
  return v;
}

// numel x element size, or a Skip for negative or overflowing dims.
int64_t byte_count(const TensorProto& t, std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0) throw Skip{"negative dimension " + std::to_string(d)};
    if (d != 0 && n > INT64_MAX / d) throw Skip{"dimensions overflow 64 bits"};
    n *= d;
    shape.push_back(d);
  }
  int64_t es = elem_size(t.data_type());
  if (n > INT64_MAX / es) throw Skip{"byte count overflows 64 bits"};
  return n * es;
}

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

// Inline bytes in the canonical layout.
std::string inline_bytes(const TensorProto& t, int64_t size) {
  std::string out;
  if (t.has_raw_data()) {
    out = t.raw_data();
  } else {
    switch (t.data_type()) {
      case TensorProto::FLOAT:
        for (float f : t.float_data()) {
          uint32_t u = 0;
          std::memcpy(&u, &f, 4);
          put_le(out, u, 4);
        }
        break;
      case TensorProto::DOUBLE:
        for (double d : t.double_data()) {
          uint64_t u = 0;
          std::memcpy(&u, &d, 8);
          put_le(out, u, 8);
        }
        break;
      case TensorProto::FLOAT16:
      case TensorProto::BFLOAT16:
        // ONNX keeps each 16-bit pattern in the low bits of an int32_data entry.
        for (int32_t v : t.int32_data()) put_le(out, static_cast<uint32_t>(v) & 0xFFFFu, 2);
        break;
      default:
        throw Skip{"element type " + onnx_import::elem_type_name(t.data_type()) + " in typed fields"};
    }
  }
  if (static_cast<int64_t>(out.size()) != size) {
    throw Skip{"holds " + std::to_string(out.size()) + " bytes of data, its shape needs " + std::to_string(size)};
  }
  return out;
}

// External data files of one model, opened once each.
class DataFiles {
 public:
  explicit DataFiles(std::string base) : base_(std::move(base)) {}

  struct File {
    std::string path;
    int64_t size = 0;
    std::string problem;  // why it cannot be read; "" when it can
    std::ifstream in;
  };

  File& get(const std::string& location) {
    auto it = files_.find(location);
    if (it != files_.end()) return it->second;
    File& f = files_[location];
    fs::path rel(location);
    bool escapes = location.empty() || rel.is_absolute() || rel.has_root_name();
    for (const fs::path& part : rel) escapes = escapes || part == "..";
    if (base_.empty()) {
      f.problem = "external data file '" + location + "' (no model folder to look in)";
    } else if (escapes) {
      f.problem = "external data location '" + location + "' is not a path inside the model's folder";
    } else {
      f.path = (fs::path(base_) / rel).string();
      std::error_code ec;
      fs::file_status st = fs::status(f.path, ec);
      if (ec || !fs::exists(st)) {
        f.problem = "external data file '" + location + "' does not exist";
      } else if (!fs::is_regular_file(st)) {
        f.problem = "external data '" + location + "' is not a regular file";
      } else {
        uintmax_t size = fs::file_size(f.path, ec);
        if (ec || size > static_cast<uintmax_t>(INT64_MAX)) {
          f.problem = "cannot read the size of external data file '" + location + "'";
        } else if (size == 0) {
          f.problem = "external data file '" + location + "' is empty";
        } else {
          f.size = static_cast<int64_t>(size);
          f.in.open(f.path, std::ios::binary);
          if (!f.in) f.problem = "cannot open external data file '" + location + "'";
        }
      }
    }
    return f;
  }

 private:
  std::string base_;
  std::map<std::string, File> files_;
};

void read_external(const TensorProto& t, TensorBytes& out, DataFiles& files) {
  std::string location;
  std::optional<int64_t> offset = 0, length;
  bool has_location = false;
  for (const onnx::StringStringEntryProto& kv : t.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
      has_location = true;
    } else if (kv.key() == "offset") {
      offset = decimal(kv.value());
      if (!offset) throw Skip{"external data offset '" + kv.value() + "' is not a decimal byte count"};
    } else if (kv.key() == "length") {
      length = decimal(kv.value());
      if (!length) throw Skip{"external data length '" + kv.value() + "' is not a decimal byte count"};
    }
  }
  if (!has_location) throw Skip{"external data without a location"};
  DataFiles::File& f = files.get(location);
  if (!f.problem.empty()) throw Skip{f.problem};
  if (*offset > f.size) {
    throw Skip{"external data offset " + std::to_string(*offset) + " is past the end of '" + location + "' (" +
               std::to_string(f.size) + " bytes)"};
  }
  int64_t len = length ? *length : f.size - *offset;
  if (len != out.size) {
    throw Skip{"external data length " + std::to_string(len) + " bytes, its shape needs " + std::to_string(out.size)};
  }
  if (len > f.size - *offset) {
    throw Skip{"external data [" + std::to_string(*offset) + ", +" + std::to_string(len) + ") is past the end of '" +
               location + "' (" + std::to_string(f.size) + " bytes)"};
  }
  f.in.clear();
  f.in.seekg(static_cast<std::streamoff>(*offset));
  Hasher64 h;
  std::string buf;
  for (int64_t at = 0; at < len; at += kChunk) {
    int64_t n = std::min(kChunk, len - at);
    buf.resize(static_cast<size_t>(n));
    f.in.read(buf.data(), static_cast<std::streamsize>(n));
    if (f.in.gcount() != static_cast<std::streamsize>(n)) throw Skip{"could not read external data of '" + location + "'"};
    h.update(buf.data(), buf.size());
  }
  out.hash = h.digest();
  out.file = f.path;
  out.offset = *offset;
}

WeightData read_model(const onnx::ModelProto& model, const std::string& base_dir, const std::string& source) {
  WeightData w;
  w.source = source;
  DataFiles files(base_dir);
  for (const TensorProto& t : model.graph().initializer()) {
    if (!is_float_elem(t.data_type())) continue;  // weights are floating point (onnx_import.h)
    const std::string& name = t.name();
    try {
      TensorBytes tb;
      tb.dtype = onnx_import::dtype_of(t.data_type(), "initializer '" + name + "'");
      tb.size = byte_count(t, tb.shape);
      if (t.has_segment()) throw Skip{"segmented tensor"};
      if (t.has_data_location() && t.data_location() == TensorProto::EXTERNAL) {
        read_external(t, tb, files);
      } else {
        auto bytes = std::make_shared<const std::string>(inline_bytes(t, tb.size));
        tb.hash = hash64(*bytes);
        tb.memory = std::move(bytes);
      }
      w.tensors[name] = std::move(tb);
      w.missing.erase(name);
    } catch (const Skip& s) {
      w.tensors.erase(name);
      w.missing[name] = s.why;
    }
  }
  return w;
}

}  // namespace

Result<WeightData> read_onnx_weights_bytes(std::string_view bytes, const std::string& base_dir,
                                           const std::string& source) {
  return capture_input_errors([&] {
    try {
      return read_model(onnx_import::parse_model(bytes), base_dir, source);
    } catch (const InputError& e) {
      throw InputError(source + ": " + e.what());
    }
  });
}

Result<WeightData> read_onnx_weights(const std::string& path) {
  return capture_input_errors([&] {
    std::string bytes;
    try {
      bytes = onnx_import::read_model_file(path);
    } catch (const InputError& e) {
      throw InputError(path + ": " + e.what());
    }
    std::string dir = fs::path(path).parent_path().string();
    Result<WeightData> r = read_onnx_weights_bytes(bytes, dir.empty() ? "." : dir, path);
    if (!r.ok()) throw InputError(r.error());
    return r.value();
  });
}

}  // namespace headroom
