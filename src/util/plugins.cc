#include "util/plugins.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <string>
#include <vector>

#include "util/error.h"

namespace headroom {
namespace {

std::string executable_dir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

std::vector<std::string> plugin_candidates(const std::string& file) {
  std::vector<std::string> out;
  const std::string dir = executable_dir();
  if (!dir.empty()) {
    out.push_back(dir + "/" + file);
    out.push_back(dir + "/" HEADROOM_PLUGIN_RELATIVE_DIR "/" + file);
  }
  out.push_back(HEADROOM_PLUGIN_INSTALL_DIR "/" + file);
  return out;
}

}  // namespace

void* open_headroom_plugin(const std::string& file, const std::string& needed_for) {
  std::string tried;
  for (const std::string& path : plugin_candidates(file)) {
    if (access(path.c_str(), F_OK) != 0) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    // RTLD_LOCAL: the plugin's copies of library code stay its own; nothing else binds to them.
    if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    const char* why = dlerror();
    throw InputError(needed_for + " needs " + path + ", which cannot be loaded: " + (why ? why : "unknown error"));
  }
  throw InputError(needed_for + " needs headroom's plugin " + file + " (looked in " + tried +
                   "); rebuild or reinstall headroom");
}

void* open_system_library(const std::string& soname, const std::string& needed_for, const std::string& package) {
  if (void* h = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  const char* why = dlerror();
  throw InputError(needed_for + " needs " + soname + " (Debian package " + package + "): " +
                   (why ? why : "cannot be loaded"));
}

void* plugin_symbol(void* handle, const std::string& library, const char* symbol) {
  dlerror();
  void* p = dlsym(handle, symbol);
  if (p == nullptr) throw InputError(library + " has no symbol " + std::string(symbol) + ": wrong version installed");
  return p;
}

}  // namespace headroom
