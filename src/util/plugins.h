// Opening headroom's optional parts at run time (dlopen), so that a run which never reads an ONNX
// file or solves an integer program does not pay, at every start, for mapping and relocating
// ONNX, protobuf and COIN-OR CBC with its BLAS/LAPACK (docs/speed.md, "Start-up").
//
// A headroom plugin is looked for next to the running executable (the build tree), then in the
// install layout relative to it (<prefix>/bin -> <prefix>/<libdir>/headroom), then in the
// configured install directory (for other programs that link the installed libraries).
//
// Invariant: a library once opened stays open for the life of the process (code and vtables it
// handed out point into it), and is opened once.
#pragma once

#include <string>

namespace headroom {

// The handle of headroom's plugin `file` (e.g. "headroom-onnx.so"). Throws InputError naming
// what needs it and every place tried when it cannot be opened.
void* open_headroom_plugin(const std::string& file, const std::string& needed_for);

// The handle of the system library `soname` (e.g. "libCbcSolver.so.3"), opened by the dynamic
// loader's search path. Throws InputError naming what needs it and the Debian package.
void* open_system_library(const std::string& soname, const std::string& needed_for, const std::string& package);

// The address of `symbol` in `handle`; throws InputError naming the library when it is missing.
void* plugin_symbol(void* handle, const std::string& library, const char* symbol);

}  // namespace headroom
