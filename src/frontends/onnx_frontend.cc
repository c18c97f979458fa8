#include "frontends/onnx_frontend.h"

#include <algorithm>
#include <cctype>
#include <mutex>

#include "util/plugins.h"

namespace headroom {
namespace {

// Guarded by table_mutex(); set once.
const OnnxFrontend* g_table = nullptr;

std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

// Here, not in the importer: choosing the frontend must not load it.
bool looks_like_onnx_path(const std::string& text) {
  const std::string ext = ".onnx";
  if (text.size() <= ext.size()) return false;
  return std::equal(ext.rbegin(), ext.rend(), text.rbegin(), [](char a, char b) {
    return a == std::tolower(static_cast<unsigned char>(b));
  });
}

void provide_onnx_frontend(const OnnxFrontend& table) {
  std::lock_guard<std::mutex> lock(table_mutex());
  static OnnxFrontend provided;
  provided = table;
  g_table = &provided;
}

const OnnxFrontend& onnx_frontend() {
  std::lock_guard<std::mutex> lock(table_mutex());
  if (g_table == nullptr) {
    void* h = open_headroom_plugin(kOnnxPluginFile, "reading an ONNX file");
    using Entry = const OnnxFrontend* (*)();
    auto entry = reinterpret_cast<Entry>(plugin_symbol(h, kOnnxPluginFile, kOnnxPluginEntry));
    g_table = entry();
  }
  return *g_table;
}

}  // namespace headroom
