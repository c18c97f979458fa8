// Whole files in and out: read one into a string, write one atomically. Every reader of a user
// file (chain and graph models, workloads, GPU catalogs) and every writer of a report goes
// through these, so open and write failures read the same everywhere.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "util/error.h"

namespace headroom {

// The file's bytes, or nullopt when it cannot be opened or read.
std::optional<std::string> read_file(const std::string& path);

// Writes `content` to `path` atomically: to `path`.tmp, then renames it over `path`, so a failure
// leaves no half-written file (and removes the .tmp). Returns the bytes written, or one line
// naming the file and the system's reason.
Result<int64_t> write_file_atomically(const std::string& path, const std::string& content);

}  // namespace headroom
