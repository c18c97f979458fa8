// Whole files in and out: read one into a string, write one atomically. Every reader of a user
// file (chain and graph models, workloads, GPU catalogs) and every writer of a report goes
// through these, so open and write failures read the same everywhere.
//
// Reading refuses what is not a regular file (a device such as /dev/zero, a FIFO, a directory)
// and files past a size limit, before reading them. Writing never follows a symlink at the
// target, never replaces anything but a regular file, and leaves either the old file or the
// whole new one.
#pragma once

#include <cstdint>
#include <string>

#include "util/error.h"

namespace headroom {

// The file's bytes, or one line naming the path and why it cannot be read ("not a regular
// file", "is N bytes, over the M-byte limit for a WHAT", the system's reason). `what` names
// the kind of file in messages ("chain file").
Result<std::string> read_input_file(const std::string& path, const std::string& what,
                                    int64_t max_bytes);

// Writes `content` to `path` atomically: to a fresh temporary file (mkstemp) in the same
// directory, fsync, then rename over `path`. Refused when `path` exists and is not a regular
// file (a device, a directory, a symlink: the link is not followed and not replaced). Returns
// the bytes written, or one line naming the file and the system's reason; on failure the
// temporary file is removed and `path` is untouched.
Result<int64_t> write_file_atomically(const std::string& path, const std::string& content);

}  // namespace headroom
